"""Evaluation: the one object every engine calls to score a candidate on one item.

Evaluation(candidate, item) runs the artifact on item.input with the meter running, then calls the
metric with the item's Observation readable through observation(), and returns a Result. Engines
differ only in how they turn a Result into their own shape.
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skynet.contract import Metric
from skynet.data import Item
from skynet.errors import CandidateFailed, ContractError, MetricError, ModelError
from skynet.measure import Observation, metering, scoring

__all__ = [
    "Result",
    "Evaluation",
    "TASK_ERROR",
    "CANDIDATE_ERROR",
    "METRIC_ERROR",
    "CONTRACT_ERROR",
]

TASK_ERROR = "task"  # the artifact (or its model) failed on the item
CANDIDATE_ERROR = "candidate"  # the candidate itself crashed (evolving code): feedback, not a fault
METRIC_ERROR = "metric"  # score() raised or timed out: not a wrong answer
CONTRACT_ERROR = "contract"  # score() returned something outside the contract


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

    @property
    def ok(self) -> bool:
        return self.error is None


class Evaluation:
    """Scores candidates on items with one metric.

    Args:
        metric: the loaded metric.
        run: runs a candidate on one item's input and returns the output
            (`run(candidate, input) -> output`); its task-model calls are metered.
    """

    def __init__(self, metric: Metric, run: Callable[[Any, dict[str, Any]], Any]) -> None:
        self.metric = metric
        self.run = run

    def __call__(self, candidate: Any, item: Item) -> Result:
        with metering(item.id) as meter:
            try:
                output = self.run(candidate, item.input)
                failure: BaseException | None = None
            except Exception as exc:  # the artifact's fault, recorded and survived
                output, failure = None, exc
        obs = meter.observation()
        if failure is not None:
            if isinstance(failure, CandidateFailed):
                kind, cause = CANDIDATE_ERROR, str(failure)
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
            )
        return self.score_output(item, output, obs)

    def score_output(self, item: Item, output: Any, obs: Observation | None) -> Result:
        """Call the metric on an output already made (a rescore uses this with the recorded
        Observation). observation() inside the metric returns a copy of `obs`."""
        # The metric gets its own copy: whatever it does to it, the record keeps the original.
        handed = dataclasses.replace(obs) if obs is not None else _UNRECORDED
        with scoring(handed):
            try:
                verdict = self.metric(item.input, output, item.expected, item_id=item.id)
            except MetricError as exc:
                return Result(
                    item_id=item.id,
                    output=output,
                    observation=obs,
                    error=str(exc),
                    error_kind=METRIC_ERROR,
                    traceback=exc.traceback,
                )
            except ContractError as exc:
                return Result(
                    item_id=item.id,
                    output=output,
                    observation=obs,
                    error=str(exc),
                    error_kind=CONTRACT_ERROR,
                )
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
