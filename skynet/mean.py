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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from skynet.evaluation import CANDIDATE_ERROR, Result

__all__ = [
    "Mean",
    "Paired",
    "beside",
    "choose_best",
    "counted_score",
    "left_out_share",
    "mean_of",
    "mean_of_results",
    "paired",
    "paired_scores",
]

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


Outcome = tuple[float | None, str | None, bool]  # (score, error kind, ok) of one item


def counted_score(outcome: Outcome) -> float | None:
    """What an item counts in a mean: its score, 0 for the candidate's own failure, None when
    it is left out (a fault that is not the candidate's)."""
    score, kind, ok = outcome
    if ok and score is not None:
        return score
    if not ok and kind == CANDIDATE_ERROR:
        return 0.0
    return None


def left_out_share(outcomes: Mapping[str, Outcome]) -> float:
    """The share of items left out of a candidate's mean (0 when it has none)."""
    if not outcomes:
        return 0.0
    return sum(counted_score(o) is None for o in outcomes.values()) / len(outcomes)


@dataclass(frozen=True, slots=True)
class Paired:
    """Two candidates on the items both have a counted score for (`n` of them)."""

    a: float | None
    b: float | None
    n: int

    @property
    def change(self) -> float | None:
        """b's mean minus a's on the shared items; None when they share none."""
        return None if self.a is None or self.b is None else self.b - self.a


def paired_scores(
    a: Mapping[str, Outcome], b: Mapping[str, Outcome]
) -> tuple[list[str], list[float], list[float]]:
    """The items both have a counted score on (counted_score), in a's order, and each side's
    scores on them: an item left out for one (a metric, model or network fault) is left out for
    both."""
    items, xs, ys = [], [], []
    for item, outcome in a.items():
        other = b.get(item)
        if other is None:
            continue
        x, y = counted_score(outcome), counted_score(other)
        if x is not None and y is not None:
            items.append(item)
            xs.append(float(x))
            ys.append(float(y))
    return items, xs, ys


def paired(a: Mapping[str, Outcome], b: Mapping[str, Outcome]) -> Paired:
    """a and b compared only on the items where both have a counted score (paired_scores), so a
    fault on the items a candidate cannot answer never lifts it above a rival that answered
    them."""
    _, xs, ys = paired_scores(a, b)
    if not xs:
        return Paired(None, None, 0)
    return Paired(sum(xs) / len(xs), sum(ys) / len(ys), len(xs))


def choose_best(
    seed: str,
    outcomes: Mapping[str, Mapping[str, Outcome]],
    *,
    preferred: str | None,
    max_error_share: float,
) -> str:
    """The candidate that may be named best, among those in `outcomes` (candidate id -> its
    outcome on every val item; in the order they were made).

    A candidate whose left-out share exceeds the seed's by more than `max_error_share` cannot
    be named best: faults it provoked must not carry it. `preferred` (the engine's choice)
    stands when it may be named; else the best is the candidate with the largest gain over the
    seed on the items both have counted (ties: the earliest; no gain: the seed).
    """
    base = outcomes.get(seed)
    if base is None:
        return preferred or seed  # the seed was never fully scored: nothing to hold others to
    ceiling = left_out_share(base) + max_error_share + 1e-12

    def allowed(cid: str) -> bool:
        return cid == seed or left_out_share(outcomes[cid]) <= ceiling

    if preferred is not None and (preferred not in outcomes or allowed(preferred)):
        return preferred
    best, best_gain = seed, 0.0
    for cid, mine in outcomes.items():
        if cid == seed or not allowed(cid):
            continue
        change = paired(base, mine).change
        if change is not None and change > best_gain:
            best, best_gain = cid, change
    return best
