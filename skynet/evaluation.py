"""Evaluation: the one object every engine calls to score a candidate on one item.

Evaluation(candidate, item) runs the artifact on item.input with the meter running, then calls the
metric with the item's Observation readable through observation(), and returns a Result. Engines
differ only in how they turn a Result into their own shape.
"""

from __future__ import annotations

import contextvars
import dataclasses
import statistics
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skynet.contract import Metric
from skynet.data import Item
from skynet.errors import (
    BudgetExhausted,
    CandidateFailed,
    ContractError,
    MetricError,
    ModelError,
    type_name,
)
from skynet.measure import Observation, metering, scoring
from skynet.models import budget
from skynet.warm_start import warming

__all__ = [
    "Result",
    "Evaluation",
    "TASK_ERROR",
    "CANDIDATE_ERROR",
    "METRIC_ERROR",
    "CONTRACT_ERROR",
    "aggregate",
    "current_draw",
    "WarmItem",
]

TASK_ERROR = "task"  # the artifact (or its model) failed on the item
CANDIDATE_ERROR = "candidate"  # the candidate itself crashed (evolving code): feedback, not a fault
METRIC_ERROR = "metric"  # score() raised or timed out: not a wrong answer
CONTRACT_ERROR = "contract"  # score() returned something outside the contract

_DRAW: contextvars.ContextVar[int] = contextvars.ContextVar("skynet_draw", default=0)


def current_draw() -> int:
    """The draw index of the artifact run in progress (0, 1, … N-1 with `repeat = N`).

    A task runner passes it to `Models.complete(draw=…)`: the draw is part of the call cache's
    key, so each repetition gets a reply of its own instead of the first one served again.
    """
    return _DRAW.get()


@dataclass(frozen=True, slots=True)
class WarmItem(Item):
    """An item on its way to an evaluation with its warm start (skynet.warm_start): `best` is
    best_so_far() while the candidate runs. Pickled with the item, it reaches any executor's
    worker. The metric is still called with the item's input, expected and id only."""

    best: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One evaluation of one candidate on one item.

    An error is never a score: on error, `score` is None, `error` says what happened in one line,
    `error_kind` says whose fault it was and `traceback` holds the details.
    """

    item_id: str
    output: Any = None
    score: float | None = None
    feedback: str = ""
    scores: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    observation: Observation | None = None
    error: str | None = None
    error_kind: str | None = None
    traceback: str = ""
    notes: tuple[str, ...] = ()
    repetitions: tuple[Result, ...] = ()
    # The type of the exception behind the error (skynet.errors.type_name): what a resume asks
    # again is decided on it (skynet.session.transient), never by reading the traceback's text.
    error_type: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) of the repetitions' scores (a candidate failure scores 0); None without
        repetitions or scores."""
        scores = [
            r.score if r.ok and r.score is not None else 0.0
            for r in self.repetitions
            if (r.ok and r.score is not None) or r.error_kind == CANDIDATE_ERROR
        ]
        return (min(scores), max(scores)) if scores else None

    @property
    def shown(self) -> int | None:
        """The index (draw) of the repetition whose output this result shows, if repeated."""
        return self.extra.get("repetition") if self.repetitions else None


def aggregate(item_id: str, runs: Sequence[Result]) -> Result:
    """One item's result from its repetitions, each a scored (or failed) run of the artifact.

    The score is the mean of the runs' scores and each named score the mean of its values, a
    run in which the candidate itself failed (CANDIDATE_ERROR) counting as 0 in both; the
    output, feedback, extra and observation are the median-quality scored run's (for an even
    count, the lower of the two middle runs, and a note says so). Any other failed run (the
    metric's or the model's fault) is left out of the means with a note. When no run was scored,
    the result is the first run's error: a candidate failure, if any run was one.
    `repetitions` keeps every run, so a rescore needs no task call.
    """
    runs = tuple(runs)
    if len(runs) == 1:
        return runs[0]
    scored = [(i, r) for i, r in enumerate(runs) if r.ok and r.score is not None]
    crashed = [r for r in runs if not r.ok and r.error_kind == CANDIDATE_ERROR]
    if not scored:
        first = crashed[0] if crashed else runs[0]
        return dataclasses.replace(
            first,
            repetitions=runs,
            notes=(*first.notes, f"all {len(runs)} runs of the item failed"),
        )
    ranked = sorted(scored, key=lambda pair: (pair[1].score, pair[0]))
    n = len(ranked)
    middle = (n - 1) // 2  # odd: the median; even: the lower of the two middle runs
    index, shown = ranked[middle]
    # A crash is the candidate's worst answer, not a missing one: 0 in every mean.
    scores = [r.score for _, r in scored if r.score is not None] + [0.0] * len(crashed)
    names = dict.fromkeys(name for _, r in scored for name in r.scores)
    means = {
        name: statistics.fmean(
            [r.scores[name] for _, r in scored if name in r.scores] + [0.0] * len(crashed)
        )
        for name in names
    }
    lo, hi = min(scores), max(scores)
    notes = list(shown.notes)
    notes.append(
        f"repeat {len(runs)}: mean {statistics.fmean(scores):.3f}, spread {lo:.3f}-{hi:.3f}; "
        + (
            f"the output shown is run {index + 1}, the median-quality one"
            if n % 2
            else f"the output shown is run {index + 1}, the lower of the two middle-quality runs"
        )
    )
    if crashed:
        notes.append(f"{len(crashed)} of {len(runs)} runs failed (the candidate's own): 0 each")
    failed = len(runs) - n - len(crashed)
    if failed:
        notes.append(f"{failed} of {len(runs)} runs failed: left out of the means")
    return Result(
        item_id=item_id,
        output=shown.output,
        score=statistics.fmean(scores),
        feedback=shown.feedback,
        scores=means,
        extra={**shown.extra, "repetition": index, "spread": [lo, hi]},
        observation=shown.observation,
        notes=tuple(notes),
        repetitions=runs,
    )


class Evaluation:
    """Scores candidates on items with one metric.

    Args:
        metric: the loaded metric.
        run: runs a candidate on one item's input and returns the output
            (`run(candidate, input) -> output`); its task-model calls are metered.
    """

    def __init__(
        self, metric: Metric, run: Callable[[Any, dict[str, Any]], Any], *, repeat: int = 1
    ) -> None:
        if repeat < 1:
            raise ValueError(f"repeat must be >= 1, not {repeat}")
        self.metric = metric
        self.run = run
        self.repeat = repeat

    def __call__(self, candidate: Any, item: Item) -> Result:
        """Run the candidate on the item `repeat` times (draws 0 … repeat-1), score each run.
        A WarmItem's warm start is skynet.warm_start.best_so_far() while the candidate runs."""
        with warming(item.best if isinstance(item, WarmItem) else ()):
            if self.repeat == 1:
                return self._once(candidate, item, 0)
            return aggregate(item.id, [self._once(candidate, item, d) for d in range(self.repeat)])

    def rescore(self, item: Item, recorded: Result) -> Result:
        """Score a recorded result's outputs again (every repetition), calling no task."""
        if recorded.repetitions:
            return aggregate(item.id, [self._rescore_one(item, r) for r in recorded.repetitions])
        return self._rescore_one(item, recorded)

    def _rescore_one(self, item: Item, recorded: Result) -> Result:
        if recorded.error_kind in (TASK_ERROR, CANDIDATE_ERROR):
            return recorded  # no output to score: the error stands under the new metric
        return self.score_output(item, recorded.output, recorded.observation)

    def _once(self, candidate: Any, item: Item, draw: int) -> Result:
        token = _DRAW.set(draw)
        try:
            return self._run_and_score(candidate, item)
        finally:
            _DRAW.reset(token)

    def _run_and_score(self, candidate: Any, item: Item) -> Result:
        # A refused model call means no result: it is raised, never recorded as the item's
        # error or score, even when the artifact or the metric caught it and went on.
        with budget.refusals() as refused:
            result = self._run_and_score_once(candidate, item)
        if refused:
            raise refused[0]
        return result

    def _run_and_score_once(self, candidate: Any, item: Item) -> Result:
        with metering(item.id) as meter:
            try:
                output = self.run(candidate, item.input)
                failure: BaseException | None = None
            except BudgetExhausted:
                meter.wait_calls()
                raise
            except Exception as exc:  # the artifact's fault, recorded and survived
                output, failure = None, exc
        # The item ends when the calls its candidate started have ended (a thread it left
        # running with a call in flight): their cost is the item's, and they are in the ledger
        # before a worker hands its calls to the driver.
        meter.wait_calls()
        obs = meter.observation()
        if failure is not None:
            return self.failure(item, failure, obs)
        return self.score_output(item, output, obs)

    def failure(self, item: Item, failure: BaseException, obs: Observation | None) -> Result:
        """The result of a run of the artifact that raised `failure` on `item`: the candidate's
        own fault (CandidateFailed, or a model call refused for what the candidate sent) or the
        task's (the model's service, the network, the configuration, anything else).

        A refused request counts as the candidate's: were it left out of the mean, a candidate
        that cannot answer an item could send a request the model must refuse (a NaN
        temperature, a prompt past the context window) and have its wrong answer vanish.
        """
        if isinstance(failure, CandidateFailed):
            kind, cause = CANDIDATE_ERROR, str(failure)
        elif isinstance(failure, ModelError) and failure.refused_request:
            kind = CANDIDATE_ERROR
            cause = f"its model call was refused for what it sent ({failure})"
        else:
            kind = TASK_ERROR
            cause = str(failure) if isinstance(failure, ModelError) else repr(failure)
        return Result(
            item_id=item.id,
            observation=obs,
            error=f"the candidate failed on item '{item.id}': {cause}"
            if kind == CANDIDATE_ERROR
            else f"the artifact failed on item '{item.id}': {cause}",
            error_kind=kind,
            traceback="".join(traceback.format_exception(failure)),
            error_type=type_name(type(failure)),
        )

    def score_output(self, item: Item, output: Any, obs: Observation | None) -> Result:
        """Call the metric on an output already made (a rescore uses this with the recorded
        Observation). observation() inside the metric returns a copy of `obs`."""
        # The metric gets its own copy: whatever it does to it, the record keeps the original.
        handed = dataclasses.replace(obs) if obs is not None else _UNRECORDED
        failed: Result | None = None
        with budget.refusals() as refused, scoring(handed):
            try:
                verdict = self.metric(item.input, output, item.expected, item_id=item.id)
            except MetricError as exc:
                failed = Result(
                    item_id=item.id,
                    output=output,
                    observation=obs,
                    error=str(exc),
                    error_kind=METRIC_ERROR,
                    traceback=exc.traceback,
                    extra=dict(exc.extra),  # what score() printed before it failed
                    error_type=exc.error_type or type_name(type(exc)),
                )
            except ContractError as exc:
                failed = Result(
                    item_id=item.id,
                    output=output,
                    observation=obs,
                    error=str(exc),
                    error_kind=CONTRACT_ERROR,
                    error_type=type_name(type(exc)),
                )
        if refused:
            # A judge call was refused (raised through the metric, or caught by it): neither an
            # error of the metric nor a verdict, so nothing is recorded for the item.
            raise refused[0]
        if failed is not None:
            return failed
        return Result(
            item_id=item.id,
            output=output,
            score=verdict.score,
            feedback=verdict.feedback,
            scores=verdict.scores,
            extra=verdict.extra,
            observation=obs,
            notes=verdict.notes,
        )


# A rescored output whose run recorded no Observation: nothing was measured.
_UNRECORDED = Observation(
    elapsed_ms=0.0,
    cost_usd=None,
    cost_note="not recorded for this output",
    time_note="not recorded for this output",
)
