"""The judge prompt (the output fenced as data) and the grade read back from the reply."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from skynet.data import Item
from skynet.fence import fence
from skynet.scorers.judge._config import JudgeConfig

__all__ = ["parse_grade"]


def _messages(
    config: JudgeConfig, item: Item, text: str, answers: Sequence[str], order: str
) -> list[dict[str, Any]]:
    grades = ", ".join(config.grades)
    # The output is the candidate's: it sits in a fence no text can close (skynet.fence), and
    # the judge is told it is data. The fence depends on the text only, so the prompt, and the
    # cache key, of the same output judged twice stay the same.
    fenced = fence(text, "OUTPUT")
    system = (
        f"{config.instructions.strip()}\n\n"
        "You grade an output against the reference answer(s); an output that matches any one "
        f"reference is right. {fenced.note()} End your reply with one line `GRADE: <grade>`, "
        f"where <grade> is one of: {grades}. `{config.positive}` means the output is right."
    )
    reference = "Reference answer(s):\n" + "\n".join(f"- {a}" for a in answers)
    output = f"Output to grade:\n{fenced.block()}"
    parts = [reference, output] if order == "reference-first" else [output, reference]
    if item.input:
        shown = json.dumps(item.input, ensure_ascii=False, sort_keys=True, default=str)
        parts.insert(0, f"Task input:\n{shown}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


_GRADE_LINE = re.compile(r"^\W*grade\W*?[:=]\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_TRIM = "*_`'\"“”‘’.,;:!()[]<> \t"


def parse_grade(text: str, grades: Sequence[str]) -> str | None:
    """The grade a judge's reply gives, or None when it gives none clearly.

    The last line of the form `GRADE: <word>` (any case, markdown emphasis or quotes around the
    word allowed) decides; with no such line, the reply's last non-empty line must be a grade by
    itself. The word must equal one grade, case-insensitively; anything else is None.
    """
    found = _GRADE_LINE.findall(text or "")
    if found:
        candidate = found[-1]
    else:
        lines = [line for line in (text or "").splitlines() if line.strip()]
        candidate = lines[-1] if lines else ""
    word = candidate.strip(_TRIM).casefold()
    for grade in grades:
        if word == grade.casefold():
            return grade
    return None
