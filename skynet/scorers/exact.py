"""exact: is the reply's text one of the item's accepted answers, after case and whitespace?

The item's label is its expected output column (the only one, or the one `label` names); a list
value means several accepted answers. Text is compared after Unicode case folding, trimming and
collapsing every run of whitespace to one space. The reasons, the first that applies is given:

    failed · no-answer · match · mismatch

"failed" is an output that reports its own failure: a dict output with a non-empty "error" key
(a code artifact saying it could not answer), or a reply that stopped at the token limit
("truncated"). "no-answer" is an output with no text (None, "", whitespace only). The judge scorer
sorts these two kinds of output the same way, without a judge call (`sort_output`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skynet.data import Item
from skynet.errors import DatasetError
from skynet.scorers.base import Reply, Verdict

__all__ = [
    "FAILED",
    "MATCH",
    "MISMATCH",
    "NO_ANSWER",
    "REASONS",
    "Exact",
    "accepted_answers",
    "normalise",
    "output_text",
    "sort_output",
]

FAILED = "failed"
NO_ANSWER = "no-answer"
MATCH = "match"
MISMATCH = "mismatch"
REASONS = (FAILED, NO_ANSWER, MATCH, MISMATCH)


def normalise(text: str) -> str:
    """Text as `exact` compares it: case-folded, trimmed, whitespace runs as one space."""
    return " ".join(text.casefold().split())


def accepted_answers(item: Item, label: str | None = None) -> list[str]:
    """The item's accepted answers: its label column's value, a list meaning several.

    Args:
        item: the item.
        label: the output column holding the label; None when the item has exactly one.

    Raises:
        DatasetError: the column is missing, the item has several outputs and no label is named,
            or the value is not a str, a number or a non-empty list of them.
    """
    expected = item.expected or {}
    if label is not None:
        if label not in expected:
            have = ", ".join(map(repr, expected)) or "none"
            raise DatasetError(
                f"item '{item.id}' has no output column {label!r} (its outputs: {have}); set "
                "the label option to one of them"
            )
        raw = expected[label]
    elif len(expected) == 1:
        raw = next(iter(expected.values()))
    else:
        have = ", ".join(map(repr, expected)) or "none"
        raise DatasetError(
            f"item '{item.id}' has {len(expected)} output columns ({have}); name the one that "
            'holds the answer with the label option (e.g. label = "answer")'
        )
    values = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    answers: list[str] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise DatasetError(
                f"item '{item.id}': the label is {value!r}; give a str (or a list of str, one "
                "per accepted answer)"
            )
        answers.append(str(value))
    if not answers:
        raise DatasetError(
            f"item '{item.id}': the label is an empty list; give at least one accepted answer"
        )
    return answers


def output_text(output: Any) -> str:
    """The text of an output: a str as is, a Reply's or a dict's "text", "" for None."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, Reply):
        return output.text
    if isinstance(output, Mapping):
        text = output.get("text")
        return "" if text is None else str(text)
    return str(output)


def sort_output(output: Any) -> Verdict | None:
    """The verdict on an output that needs no comparison, or None when it must be compared.

    "failed": a dict output with a non-empty "error", or a truncated reply (a Reply, or a dict
    with "truncated": true). "no-answer": no text. Anything else: None.
    """
    if isinstance(output, Mapping) and output.get("error"):
        return Verdict(
            False, FAILED, f"the output reports its own failure: {str(output['error'])[:200]}"
        )
    truncated = (
        output.truncated
        if isinstance(output, Reply)
        else bool(output.get("truncated"))
        if isinstance(output, Mapping)
        else False
    )
    if truncated:
        return Verdict(False, FAILED, "the reply stopped at the token limit before it finished")
    if not output_text(output).strip():
        return Verdict(False, NO_ANSWER, "the output has no text")
    return None


class Exact:
    """The exact scorer, version 1: the reply's text is one of the item's accepted answers.

    Args:
        label: the output column holding the answer, when the items have several.
    """

    name = "exact"
    version = 1
    reasons = REASONS

    def __init__(self, *, label: str | None = None) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"Exact(label={self.label!r})"

    def key(self, item: Item) -> Reply:
        """The first accepted answer, as a reply's text."""
        return Reply(text=accepted_answers(item, self.label)[0])

    def score(self, item: Item, reply: Reply) -> Verdict:
        """Compare a reply's text with the item's accepted answers.

        Raises:
            DatasetError: the item's label cannot be read (the item cannot be judged).
        """
        return self.score_output(item, reply)

    def score_output(self, item: Item, output: Any) -> Verdict:
        """Like `score`, for an artifact's output as it came (a str, a dict, a Reply, None)."""
        answers = accepted_answers(item, self.label)
        sorted_ = sort_output(output)
        if sorted_ is not None:
            return sorted_
        got = normalise(output_text(output))
        if any(got == normalise(answer) for answer in answers):
            return Verdict(True, MATCH, "the text is an accepted answer")
        shown = " | ".join(repr(a) for a in answers[:5])
        return Verdict(False, MISMATCH, f"the text is not an accepted answer ({shown})")
