"""Right count of primes first; among right programs, faster is better."""

from skynet import reward

REWARD_SPEC = {
    "weights": {"accuracy": 0.7, "speed": 0.3, "cost": 0.0},
    "speed": {"reference": 300},  # ms: a run this fast gets half the speed credit
}


def key(expected):
    return {"count": expected["count"]}


def score(input, output, expected=None):
    got = output.get("count") if isinstance(output, dict) else None
    right = got == expected["count"]
    feedback = (
        f"Right count ({got}) for n={input['n']}."
        if right
        else f"Wrong: for n={input['n']} the count of primes below n is {expected['count']}, "
        f"the program returned {got!r}. Return {{'count': <int>}}."
    )
    return reward(REWARD_SPEC, float(right), feedback)
