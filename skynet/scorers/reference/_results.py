"""What a grade holds: each value's FieldResult, each list's matching, the record's sub-scores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from skynet.scorers.reference._feedback import _feedback


class FieldResult(NamedTuple):
    """How one value was compared.

    A NamedTuple, so immutable: built about three times faster than a frozen dataclass, and the
    exact path builds one per value, 20,000 and more a second.

    Attributes:
        path: where the value sits, e.g. "director" or "cast[2].name" (list items by their index
            in the reference; a hallucinated item is in its ListResult, not here).
        candidate: the candidate's value (None when missing).
        reference: the reference's value (None when the candidate's value is extra).
        rung: which rung decided: exact, date, similarity, judge, missing, extra or shape.
        equal: whether the value counts as right; None when the judge's reply could not be read.
        credit: what the value adds to the sub-scores, in [0, 1]; None: left out of them (a judge
            reply that could not be read).
        similarity: the cosine, when the similarity rung ran.
        grade: the judge's grade 0-100, when the judge rung ran.
        note: plain words on anything unusual (e.g. the judge's unreadable reply).
    """

    path: str
    candidate: Any
    reference: Any
    rung: str
    equal: bool | None
    credit: float | None
    similarity: float | None = None
    grade: int | None = None
    note: str = ""


class Match(NamedTuple):
    """A reference list item paired with a candidate item.

    Attributes:
        reference_index, candidate_index: the items' positions in their lists.
        reference, candidate: the items.
        score: the pair's quality (for records, the F1 of their fields; for values, the credit).
        fields: the pair's per-field detail.
    """

    reference_index: int
    candidate_index: int
    reference: Any
    candidate: Any
    score: float
    fields: tuple[FieldResult, ...]


class Unmatched(NamedTuple):
    """A list item left without a partner: missed (reference) or hallucinated (candidate)."""

    index: int
    value: Any


@dataclass(frozen=True, slots=True)
class ListResult:
    """One list field, matched as a set.

    Attributes:
        path: the list's path, e.g. "cast" (or "seasons[0].episodes" for a nested list).
        matched: the pairs the optimal assignment kept (each at or above the match bar).
        missed: reference items no candidate item matched.
        hallucinated: candidate items that match no reference item.
    """

    path: str
    matched: tuple[Match, ...]
    missed: tuple[Unmatched, ...]
    hallucinated: tuple[Unmatched, ...]


@dataclass(frozen=True, slots=True)
class ReferenceResult:
    """The reference scorer's grade of one candidate record.

    Attributes:
        quality: the F1 of completeness and correctness, in [0, 1]; a run sorts by it.
        completeness: credit / reference values (how much of the reference was found).
        correctness: credit / values given (how much of what was given is right).
        fields: every compared value outside lists, and every value of matched list items.
        lists: each list field's ListResult, by path.
        notes: what ran degraded (no embedder, no judge), an unreadable output, judge errors.
        credit: the summed credit.
        reference_values: how many leaf values the reference holds (judge errors left out).
        given_values: how many leaf values the candidate gave (judge errors left out).
        threshold: the cosine threshold in force; None when no embedder ran.
    """

    quality: float
    completeness: float
    correctness: float
    fields: tuple[FieldResult, ...]
    lists: Mapping[str, ListResult]
    notes: tuple[str, ...]
    credit: float
    reference_values: int
    given_values: int
    threshold: float | None = None

    @property
    def scores(self) -> dict[str, float]:
        """The named sub-scores a run records and the reflection model reads."""
        return {
            "quality": self.quality,
            "completeness": self.completeness,
            "correctness": self.correctness,
        }

    def field(self, path: str) -> FieldResult:
        """The FieldResult at `path`.

        Raises:
            KeyError: no compared value sits there (the message lists the paths).
        """
        for found in self.fields:
            if found.path == path:
                return found
        raise KeyError(f"no field {path!r}; fields: {', '.join(f.path for f in self.fields)}")

    @property
    def feedback(self) -> str:
        """Plain words for the reflection model: the sub-scores, then what is wrong and why."""
        return _feedback(self)
