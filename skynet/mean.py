"""A candidate's mean score: what counts as 0 and what is left out.

A candidate's own failure on an item (it crashed, timed out or returned what cannot be scored:
error kind `candidate`) is the candidate's answer to that item, and the worst one: it counts as 0.
Were it left out, a candidate that crashes on the hard items would score higher than an honest
one that answers them wrongly. A fault that is not the candidate's (the metric raised, returned
something outside the contract, or the task model failed) says nothing about the candidate: it
is left out of the mean and shown beside it. GEPA's evaluator counts every failure as 0 for its
own bookkeeping; the figures Skynet shows (progress line, report, `skynet eval`, run outcome)
follow this rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from skynet.evaluation import CANDIDATE_ERROR, Result

__all__ = ["Mean", "beside", "mean_of", "mean_of_results"]

UNKNOWN = "unknown"  # an error recorded without a kind (older records)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mean:
    """The mean score of a candidate over some items.

    Attributes:
        value: the mean over the counted items; None when none was counted.
        counted: items in the mean: the scored ones and the candidate's failures (as 0).
        failures: the candidate's own failures, counted as 0.
        left_out: errors that are not the candidate's, by kind (metric, contract, task):
            left out of the mean.
    """

    value: float | None
    counted: int
    failures: int = 0
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def items(self) -> int:
        """Every item seen: counted and left out."""
        return self.counted + sum(self.left_out.values())

    def notes(self) -> list[str]:
        """What is shown beside the mean, e.g. ["2 metric errors left out"] (see `beside`)."""
        return beside(self.failures, self.left_out)

    def describe(self) -> str:
        """The mean with what stands beside it: "0.612 (2 metric errors left out)", "-"."""
        shown = "-" if self.value is None else f"{self.value:.3f}"
        notes = self.notes()
        return f"{shown} ({', '.join(notes)})" if notes else shown


def beside(failures: int, left_out: dict[str, int]) -> list[str]:
    """What is shown beside a mean: ["1 candidate failure as 0", "2 metric errors left out"]."""
    found = []
    if failures:
        found.append(f"{failures} candidate failure{'s' if failures != 1 else ''} as 0")
    for kind, n in sorted(left_out.items()):
        found.append(f"{n} {kind} error{'s' if n != 1 else ''} left out")
    return found


def mean_of(outcomes: Iterable[tuple[float | None, str | None, bool]]) -> Mean:
    """The mean of (score, error kind, ok) per item, by the rule of this module.

    A result that is ok but has no score is left out as `unknown` (it cannot be counted).
    """
    total, counted, failures = 0.0, 0, 0
    left_out: Counter[str] = Counter()
    for score, kind, ok in outcomes:
        if ok and score is not None:
            total += score
            counted += 1
        elif not ok and kind == CANDIDATE_ERROR:
            counted += 1
            failures += 1
        else:
            left_out[kind or UNKNOWN] += 1
    return Mean(
        value=total / counted if counted else None,
        counted=counted,
        failures=failures,
        left_out=dict(left_out),
    )


def mean_of_results(results: Iterable[Result]) -> Mean:
    """The mean of Results (see `mean_of`)."""
    return mean_of((r.score, r.error_kind, r.ok) for r in results)
