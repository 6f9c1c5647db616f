"""The judge rung: its instructions for each kind of field, and how its reply is read."""

from __future__ import annotations

import re

_JUDGE_COMMON = (
    "You grade one field of a structured answer against a verified reference. The user message "
    'is JSON: "field" (the field\'s name), "reference" (the verified value) and "answer" (the '
    "value to grade). Reply with one integer from 0 to 100 and nothing else. "
)
JUDGE_TEXT = _JUDGE_COMMON + (
    "Grade how well the answer keeps the reference's meaning: 100 the same meaning however "
    "worded; 0 a different or contradicting meaning, or nothing of substance; in between, part of "
    "the meaning kept and nothing contradicted."
)
JUDGE_NUMBER_PARTIAL = _JUDGE_COMMON + (
    "The field is a measured or estimated quantity where a close value earns partial credit. "
    "100: the same quantity (in any notation or unit); less the further the answer is from the "
    "reference, relative to its size and to the precision the reference is given to; 0 when it "
    "is far off or not a quantity."
)
JUDGE_NUMBER_EXACT = _JUDGE_COMMON + (
    "Precision matters in this field (a year, a count, an identifier): 100 only if the answer is "
    "the same quantity written differently (another notation or unit); otherwise 0."
)

_GRADE = re.compile(r"(?:(?:score|grade)\s*[:=]?\s*)?(\d{1,3})\s*(?:/\s*100|%)?\s*\.?", re.I)


def parse_grade(text: str) -> int | None:
    """A judge's reply as a grade 0-100, read strictly; None when it is anything else.

    Accepted: one integer, optionally after "score" or "grade" (and a colon) and before "/100",
    "%" or a full stop, with surrounding whitespace: "85", "Score: 85", "85/100". Not accepted:
    text around it ("I'd say 85"), a decimal, two numbers, a number above 100.
    """
    found = _GRADE.fullmatch(text.strip())
    if not found:
        return None
    grade = int(found[1])
    return grade if grade <= 100 else None
