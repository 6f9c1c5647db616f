def run(input):
    """Count the primes below input["n"]."""
    n = input["n"]
    count = 0
    for k in range(2, n):
        if all(k % d for d in range(2, k)):
            count += 1
    return {"count": count}
