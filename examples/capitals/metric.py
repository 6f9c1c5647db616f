"""Score a reply by whether it names the country's capital city."""


def score(input, output, expected=None):
    capital = expected["capital"]
    country = input["country"]
    named = capital.lower() in output.lower()
    brief = len(output.split()) <= 25
    if named:
        feedback = f"Right: the reply names {capital}, the capital of {country}."
        if not brief:
            feedback += " It could be shorter: one sentence is enough."
    else:
        feedback = (
            f"Wrong: the reply does not name the capital of {country}. The right answer is "
            f"{capital}; a right reply names it, e.g. 'The capital of {country} is {capital}.'"
        )
    return float(named), {
        "feedback": feedback,
        "scores": {"names_capital": float(named), "brief": float(brief)},
    }
