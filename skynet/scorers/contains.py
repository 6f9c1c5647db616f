"""contains: does the reply's text contain the item's answer? gepa's default evaluator.

`gepa.optimize` without an adapter scores a reply 1 when the item's "answer" is a substring of it
(case and spacing as written) and tells the reflection model the correct answer otherwise, with
the item's "additional_context" when it has one. `metric="contains"` is the same check, so the
gepa README's quickstart moves to Skynet with its data and prompt as they are. The label is the
item's only output column, or the one `label` names (default "answer" when there are several); a
list value means several accepted answers. The reasons, the first that applies is given:

    failed · no-answer · contains · missing
"""

from __future__ import annotations

import json
from typing import Any

from skynet.data import Item
from skynet.scorers.base import Reply, Verdict
from skynet.scorers.exact import FAILED, NO_ANSWER, accepted_answers, output_text, sort_output

__all__ = ["CONTAINS", "MISSING", "Contains"]

CONTAINS = "contains"
MISSING = "missing"
CONTEXT = "additional_context"  # gepa's DefaultDataInst: shown with a wrong answer's feedback


class Contains:
    """The contains scorer, version 1: an accepted answer appears in the reply's text.

    Args:
        label: the output column holding the answer; default: the only one, or "answer".
    """

    name = "contains"
    version = 1
    reasons = (FAILED, NO_ANSWER, CONTAINS, MISSING)

    def __init__(self, *, label: str | None = None) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"Contains(label={self.label!r})"

    def _label(self, item: Item) -> str | None:
        expected = item.expected or {}
        if self.label is None and len(expected) > 1 and "answer" in expected:
            return "answer"
        return self.label

    def key(self, item: Item) -> Reply:
        """The first accepted answer, as a reply's text."""
        return Reply(text=accepted_answers(item, self._label(item))[0])

    def score(self, item: Item, reply: Reply) -> Verdict:
        """Whether the reply's text contains an accepted answer.

        Raises:
            DatasetError: the item's label cannot be read (the item cannot be judged).
        """
        return self.score_output(item, reply)

    def score_output(self, item: Item, output: Any) -> Verdict:
        """Like `score`, for an artifact's output as it came (a str, a dict, a Reply, None)."""
        answers = accepted_answers(item, self._label(item))
        sorted_ = sort_output(output)
        if sorted_ is not None:
            return sorted_
        text = output_text(output)
        found = next((a for a in answers if a in text), None)
        if found is not None:
            return Verdict(True, CONTAINS, f"the response includes the correct answer {found!r}")
        detail = (
            f"the correct answer is {answers[0]!r}, and the response does not include it; "
            "include the correct answer in the response exactly as it is written"
        )
        context = (item.expected or {}).get(CONTEXT)
        if context:
            shown = context if isinstance(context, str) else json.dumps(context, default=str)
            detail += f". Additional context that may help:\n{shown}"
        return Verdict(False, MISSING, detail)
