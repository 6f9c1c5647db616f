"""The judge asking and deciding, and the judge as a scorer (and so as a run's metric)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skynet.data import Item
from skynet.errors import ConfigError, JudgeFailed, JudgeUnvalidated, ModelError
from skynet.models.governor import Governor
from skynet.models.ledger import CallRecord, Ledger
from skynet.scorers.base import Reply, Verdict
from skynet.scorers.exact import FAILED, NO_ANSWER, accepted_answers, output_text, sort_output
from skynet.scorers.judge._config import JudgeConfig
from skynet.scorers.judge._prompt import _messages, parse_grade
from skynet.scorers.judge._validation import (
    HOW_TO_VALIDATE,
    JudgeThresholds,
    JudgeValidation,
    judge_problems,
)
from skynet.scorers.registry import metric_of

if TYPE_CHECKING:
    from skynet.contract import Metric
    from skynet.models import Models

__all__ = [
    "JUDGE_FAILED",
    "JUDGE_UNRESOLVED",
    "OUTCOMES",
    "RIGHT",
    "WRONG",
    "JudgeCall",
    "JudgeDecision",
    "JudgeScorer",
    "judge_metric",
    "judge_scorer",
]

RIGHT = "right"
WRONG = "wrong"
JUDGE_UNRESOLVED = "judge_unresolved"
JUDGE_FAILED = JudgeFailed.outcome  # "judge_failed"
# Every outcome a judged output can have; judge_failed is an error, the rest are verdicts.
OUTCOMES = (RIGHT, WRONG, JUDGE_UNRESOLVED, JUDGE_FAILED, NO_ANSWER, FAILED)


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeCall:
    """One judge call as the scorer made it (its `trace`).

    Attributes:
        item_id: the item judged.
        order: the presentation order asked.
        model: the judge's model.
        grade: the grade read from the reply, None when none could be read (or the call failed).
        reply: the judge's reply text, cut to 500 characters.
        cost_usd: the call's cost (None: unpriced); a cached call cost nothing this time.
        cached: served from the call cache.
        draw: the draw index (part of the cache key).
        error: why the call failed, "" when it did not.
        input_tokens, output_tokens, elapsed_ms, attempts: the call's figures, as the model
            session measured them (a failed call: its attempts only).
    """

    item_id: str
    order: str
    model: str
    grade: str | None
    reply: str
    cost_usd: float | None
    cached: bool
    draw: int
    error: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    elapsed_ms: float = 0.0
    attempts: int = 1

    def call_record(self) -> CallRecord:
        """The call as a metric ledger's record."""
        return CallRecord(
            role="metric",
            model=self.model,
            elapsed_ms=self.elapsed_ms,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost_usd=self.cost_usd,
            cached=self.cached,
            attempts=self.attempts,
            ok=not self.error,
            error=self.error,
            item_id=self.item_id,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeDecision:
    """The judge's decision on one output: right or not, the outcome, and why."""

    correct: bool
    outcome: str
    detail: str
    grades: tuple[str | None, ...] = ()


class _Judge:
    """Asks the judge; no validation check (validation itself needs the judge's decisions)."""

    name = "judge"
    version = 1
    reasons = (RIGHT, WRONG, JUDGE_UNRESOLVED, NO_ANSWER, FAILED)

    def __init__(
        self,
        config: JudgeConfig,
        *,
        governor: Governor | None = None,
        draw_index: int = 0,
        label: str | None = None,
        models: Models | None = None,
    ) -> None:
        if not isinstance(config, JudgeConfig):
            raise ConfigError(
                f"the judge needs a JudgeConfig (from judge_config()), not {type(config).__name__}"
            )
        if isinstance(draw_index, bool) or not isinstance(draw_index, int) or draw_index < 0:
            raise ConfigError(f"draw_index {draw_index!r}; give an int >= 0")
        self.config = config
        self.governor = governor
        self.draw_index = draw_index
        self.label = label
        self._models = models
        self._lock = threading.Lock()
        self._trace: list[JudgeCall] = []

    @property
    def config_hash(self) -> str:
        return self.config.config_hash

    @property
    def trace(self) -> tuple[JudgeCall, ...]:
        """Every judge call this scorer made, in order (cached ones included, flagged)."""
        with self._lock:
            return tuple(self._trace)

    @property
    def ledger(self) -> Ledger:
        """The calls of `trace` as a metric ledger, for their totals (cost, failed, cached).

        Made afresh from the trace on each read, not kept beside it: the model session records
        each call once, in its own metric ledger (a run's), and the trace keeps what the session
        gave back of the calls this scorer made.
        """
        ledger = Ledger("metric")
        for call in self.trace:
            ledger.add(call.call_record())
        return ledger

    def _session(self) -> Models:
        if self._models is not None:
            return self._models
        from skynet.models import current

        return current(for_metric=True)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        if self.governor is None:
            yield
        else:
            with self.governor.slot():
                yield

    def _ask(self, item: Item, text: str, answers: Sequence[str], order: str) -> str | None:
        config = self.config
        messages = _messages(config, item, text, answers, order)
        try:
            with self._slot():
                reply = self._session().complete(
                    "metric",
                    messages,
                    model=config.model,
                    draw=self.draw_index,
                    temperature=config.temperature,
                    max_tokens=config.max_tokens,
                )
        except ModelError as exc:
            call = JudgeCall(
                item_id=item.id,
                order=order,
                model=config.model,
                grade=None,
                reply="",
                cost_usd=None,
                cached=False,
                draw=self.draw_index,
                error=str(exc) or type(exc).__name__,
                attempts=exc.attempts,
            )
            with self._lock:
                self._trace.append(call)
            raise
        grade = parse_grade(reply.text, config.grades)
        with self._lock:
            self._trace.append(
                JudgeCall(
                    item_id=item.id,
                    order=order,
                    model=reply.model,
                    grade=grade,
                    reply=reply.text[:500],
                    cost_usd=reply.cost_usd,
                    cached=reply.cached,
                    draw=self.draw_index,
                    input_tokens=reply.input_tokens,
                    output_tokens=reply.output_tokens,
                    elapsed_ms=reply.elapsed_ms,
                    attempts=reply.attempts,
                )
            )
        return grade

    def decide(self, item: Item, output: Any) -> JudgeDecision:
        """The judge's decision on `output` for `item`; a failed call is outcome judge_failed.

        Raises:
            DatasetError: the item's label cannot be read (the item cannot be judged).
        """
        answers = accepted_answers(item, self.label)
        sorted_ = sort_output(output)
        if sorted_ is not None:
            return JudgeDecision(correct=False, outcome=sorted_.reason, detail=sorted_.detail)
        text = output_text(output)
        config = self.config
        grades: list[str | None] = []
        for order in config.orders:
            try:
                grade = self._ask(item, text, answers, order)
            except ModelError as exc:
                return JudgeDecision(
                    correct=False,
                    outcome=JUDGE_FAILED,
                    detail=f"the judge call ({order}) failed: {exc}",
                    grades=tuple(grades),
                )
            grades.append(grade)
            if grade is None:
                return JudgeDecision(
                    correct=False,
                    outcome=JUDGE_UNRESOLVED,
                    detail=f"the judge's reply ({order}) gives no grade out of "
                    f"{', '.join(config.grades)}; counted wrong",
                    grades=tuple(grades),
                )
        if len(set(grades)) > 1:
            said = ", ".join(f"{o} {g}" for o, g in zip(config.orders, grades, strict=True))
            return JudgeDecision(
                correct=False,
                outcome=JUDGE_UNRESOLVED,
                detail=f"the orders disagree ({said}); counted wrong",
                grades=tuple(grades),
            )
        grade = grades[0]
        if grade == config.positive:
            return JudgeDecision(
                correct=True,
                outcome=RIGHT,
                detail=f"the judge graded it {grade} in every order",
                grades=tuple(grades),
            )
        return JudgeDecision(
            correct=False,
            outcome=WRONG,
            detail=f"the judge graded it {grade} (right is {config.positive}) against "
            f"{_listed(answers)}",
            grades=tuple(grades),
        )


def _listed(answers: Sequence[str]) -> str:
    shown = " | ".join(repr(a) for a in answers[:5])
    return shown + (f" and {len(answers) - 5} more" if len(answers) > 5 else "")


class JudgeScorer(_Judge):
    """The judge as a scorer (name "judge", version 1). Build it with judge_scorer().

    Reasons: right, wrong, judge_unresolved, no-answer, failed. A judge call that fails after
    retries raises JudgeFailed (outcome judge_failed): the item is an error, not a wrong answer.
    It gives a Verdict (`score`) and the metric contract's pair (`metric_result`), so the one
    adapter, skynet.scorers.metric_of, makes it a run's metric (judge_metric).
    """

    def __init__(
        self,
        config: JudgeConfig,
        validation: JudgeValidation | None,
        *,
        governor: Governor | None = None,
        draw_index: int = 0,
        label: str | None = None,
        models: Models | None = None,
        thresholds: JudgeThresholds | None = None,
    ) -> None:
        super().__init__(
            config, governor=governor, draw_index=draw_index, label=label, models=models
        )
        if validation is None:
            raise JudgeUnvalidated(
                f"judge {config.config_hash[:12]} ({config.model}) has no validation record, so "
                f"it may not score; {HOW_TO_VALIDATE}"
            )
        problems = judge_problems(validation, config, thresholds)
        if problems:
            raise JudgeUnvalidated(
                f"judge {config.config_hash[:12]} ({config.model}) is not validated: "
                f"{'; '.join(problems)}; {HOW_TO_VALIDATE}"
            )
        self.validation = validation

    def key(self, item: Item) -> str:
        """The item's first accepted answer: the output a model that got the item right gives.

        Raises:
            DatasetError: the item's label cannot be read.
        """
        return accepted_answers(item, self.label)[0]

    def score(self, item: Item, reply: Reply) -> Verdict:
        """Judge a reply against the item's label.

        Raises:
            JudgeFailed: a judge call failed after retries (outcome judge_failed).
            DatasetError: the item's label cannot be read.
        """
        return self.score_output(item, reply)

    def score_output(self, item: Item, output: Any) -> Verdict:
        """Like `score`, for an artifact's output as it came (a str, a dict, a Reply, None)."""
        decision = self.decide(item, output)
        if decision.outcome == JUDGE_FAILED:
            raise JudgeFailed(f"item '{item.id}': {decision.detail}", item_id=item.id)
        return Verdict(decision.correct, decision.outcome, decision.detail)

    def metric_result(self, item: Item, output: Any) -> tuple[float, dict[str, Any]]:
        """The metric contract's pair: (1.0 right or 0.0, {"feedback": "outcome: detail",
        "outcome": outcome}).

        Raises:
            JudgeFailed: a judge call failed after retries (the run records an error).
            DatasetError: the item's label cannot be read.
        """
        verdict = self.score_output(item, output)
        return (1.0 if verdict.correct else 0.0), {
            "feedback": f"{verdict.reason}: {verdict.detail}",
            "outcome": verdict.reason,
        }


def judge_scorer(
    config: JudgeConfig,
    validation: JudgeValidation | None,
    governor: Governor | None = None,
    draw_index: int = 0,
    *,
    label: str | None = None,
    models: Models | None = None,
    thresholds: JudgeThresholds | None = None,
) -> JudgeScorer:
    """The judge as a scorer, if `validation` accepts it for `config`.

    Args:
        config: the judge configuration.
        validation: its validation record (judge_validate or JudgeValidation.load).
        governor: a skynet.models.governor.Governor whose slot every call also holds.
        draw_index: part of the cache key: a fixed index reuses one cached verdict for identical
            output and label; another index draws afresh.
        label: the output column holding the label, when the items have several.
        models: the model session to call through (default: the one in force, as llm() uses).
        thresholds: the thresholds to hold the record to (default: the record's own).

    Raises:
        JudgeUnvalidated: no record, a record made for another config_hash, or one that does not
            meet the thresholds; the message says how to validate.
    """
    return JudgeScorer(
        config,
        validation,
        governor=governor,
        draw_index=draw_index,
        label=label,
        models=models,
        thresholds=thresholds,
    )


def judge_metric(scorer: JudgeScorer) -> Metric:
    """A validated judge scorer as a run's metric (a skynet.Metric), through metric_of as every
    scorer: it is handed the item the run scores, under the run's id.

    It returns (1.0 or 0.0, {"feedback": "outcome: detail", "outcome": outcome}); a judge call
    that fails after retries raises (the run records the item as an error, outcome judge_failed).
    Its answer key is the item's first accepted answer; its source hash covers the scorer's
    version, the config_hash, the validation record's hash and the label column.
    """
    # What else its verdicts rest on: the record that accepted it and the column read as label.
    return metric_of(scorer, depends_on=(scorer.validation.hash, scorer.label))
