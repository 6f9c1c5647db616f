"""A validated LLM judge: no judge scores a run until it agrees with blind human labels.

```python
from skynet import scorers
config = scorers.judge_config("openai/gpt-4o-mini", "Is the answer the reference's city?")
record = scorers.judge_validate(config, [(True, True), (False, False), ...])  # (judge, human)
record.save("judge-validation.json")
scorer = scorers.judge_scorer(config, record)            # JudgeUnvalidated unless judge_valid
verdict = scorer.score(item, scorers.Reply(text="Paris"))
```

The judge grades an output against the item's label (every accepted answer listed), once in
each of the configuration's presentation orders. Right when every order answers the positive
grade; a reply it cannot parse, or orders that disagree, are wrong with outcome
"judge_unresolved"; a call that fails after retries is an error with outcome "judge_failed".
Outputs with no text, or that report their own failure, are sorted as the `exact` scorer sorts
them, with no judge call.

Judge calls go through skynet.models with the "metric" role: cached (the draw index is part of
the key), governed, retried, and recorded in the metric (judge) ledger, never in the task cost
that service_cost() reads. The scorer keeps its own `trace` and `ledger` of the calls it made.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from skynet.data import Item, read_jsonl
from skynet.errors import (
    ConfigError,
    DatasetError,
    JudgeFailed,
    JudgeUnvalidated,
    ModelError,
)
from skynet.fence import fence
from skynet.models.governor import Governor
from skynet.models.ledger import CallRecord, Ledger
from skynet.scorers.base import Reply, Verdict
from skynet.scorers.exact import FAILED, NO_ANSWER, accepted_answers, output_text, sort_output
from skynet.textfile import read_text

if TYPE_CHECKING:
    from skynet.contract import Metric
    from skynet.models import Models

__all__ = [
    "DEFAULT_GRADES",
    "DEFAULT_THRESHOLDS",
    "HOW_TO_VALIDATE",
    "JUDGE_FAILED",
    "JUDGE_UNRESOLVED",
    "MODES",
    "ORDERS",
    "OUTCOMES",
    "RIGHT",
    "WRONG",
    "Estimate",
    "JudgeCall",
    "JudgeConfig",
    "JudgeDecision",
    "JudgeFailed",
    "JudgeScorer",
    "JudgeThresholds",
    "JudgeValidation",
    "judge_config",
    "judge_metric",
    "judge_problems",
    "judge_scorer",
    "judge_valid",
    "judge_validate",
    "parse_grade",
]

MODES = ("grade",)
ORDERS = ("reference-first", "output-first")
DEFAULT_GRADES = ("pass", "fail")

RIGHT = "right"
WRONG = "wrong"
JUDGE_UNRESOLVED = "judge_unresolved"
JUDGE_FAILED = JudgeFailed.outcome  # "judge_failed"
# Every outcome a judged output can have; judge_failed is an error, the rest are verdicts.
OUTCOMES = (RIGHT, WRONG, JUDGE_UNRESOLVED, JUDGE_FAILED, NO_ANSWER, FAILED)

# The judge prompt's wording is part of every verdict: a change to it changes this version, and
# so every config_hash, so old validation records no longer accept the judge.
_PROTOCOL = 2  # 2: the output in a fence it cannot close (skynet.fence)
_RECORD_FORMAT = "skynet-judge-validation"
_RECORD_VERSION = 1

HOW_TO_VALIDATE = (
    "validate the judge: `skynet judge collect` writes a blind sample of outputs to label, set "
    '"human" to true or false on each line, then `skynet judge validate --labels FILE` writes '
    "the record (in Python: judge_validate(config, labels).save(path))"
)


# -- configuration -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeConfig:
    """Everything that changes a judge's verdict. Build it with judge_config().

    Attributes:
        model: the litellm model name of the judge.
        instructions: what the judge is told to check (the system message, before the protocol).
        mode: "grade": the judge answers one word out of `grades`.
        grades: the words the judge may answer.
        positive: the grade that means the output is right.
        orders: the presentation orders asked, each of "reference-first", "output-first".
        temperature, max_tokens: sampling parameters of every judge call.
    """

    model: str
    instructions: str
    mode: str = "grade"
    grades: tuple[str, ...] = DEFAULT_GRADES
    positive: str = "pass"
    orders: tuple[str, ...] = ORDERS
    temperature: float = 0.0
    max_tokens: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(self, "grades", tuple(self.grades))
        object.__setattr__(self, "orders", tuple(self.orders))
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(
                'judge_config: model is empty; name the judge\'s model, e.g. "openai/gpt-4o-mini"'
            )
        if not isinstance(self.instructions, str) or not self.instructions.strip():
            raise ConfigError(
                "judge_config: instructions are empty; say what the judge must check, e.g. "
                '"Is the output the same city as the reference?"'
            )
        if self.mode not in MODES:
            raise ConfigError(
                f"judge_config: mode {self.mode!r} is not one of {', '.join(map(repr, MODES))}"
            )
        words = [g.strip().casefold() for g in self.grades if isinstance(g, str)]
        if len(words) != len(self.grades) or len(words) < 2 or not all(words):
            raise ConfigError(
                f"judge_config: grades {list(self.grades)!r}; give at least two non-empty words, "
                'e.g. ["pass", "fail"]'
            )
        if len(set(words)) != len(words) or any(len(w.split()) != 1 for w in words):
            raise ConfigError(
                f"judge_config: grades {list(self.grades)!r} must be distinct single words "
                "(the judge answers one of them)"
            )
        if self.positive not in self.grades:
            raise ConfigError(
                f"judge_config: positive {self.positive!r} is not one of the grades "
                f"{list(self.grades)!r}; name the grade that means right"
            )
        if not self.orders or any(o not in ORDERS for o in self.orders):
            raise ConfigError(
                f"judge_config: orders {list(self.orders)!r}; give one or both of "
                f"{', '.join(map(repr, ORDERS))}"
            )
        if len(set(self.orders)) != len(self.orders):
            raise ConfigError(f"judge_config: orders {list(self.orders)!r} names one order twice")
        if isinstance(self.temperature, bool) or not (
            isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2
        ):
            raise ConfigError(
                f"judge_config: temperature {self.temperature!r}; give a number in [0, 2]"
            )
        if isinstance(self.max_tokens, bool) or not (
            isinstance(self.max_tokens, int) and self.max_tokens >= 1
        ):
            raise ConfigError(f"judge_config: max_tokens {self.max_tokens!r}; give an int >= 1")

    @property
    def config_hash(self) -> str:
        """sha256 over everything that changes a verdict, and the judge prompt's version."""
        canonical = json.dumps(
            {"protocol": _PROTOCOL, **asdict(self)},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


def judge_config(
    model: str,
    instructions: str,
    mode: str = "grade",
    positive: str = "pass",
    orders: Sequence[str] = ORDERS,
    *,
    grades: Sequence[str] = DEFAULT_GRADES,
    temperature: float = 0.0,
    max_tokens: int = 64,
) -> JudgeConfig:
    """A frozen judge configuration; its `config_hash` ties validation records to it.

    Raises:
        ConfigError: an empty model or instructions, an unknown mode or order, grades that are
            not distinct single words, a positive grade not among them, bad parameters.
    """
    return JudgeConfig(
        model=model,
        instructions=instructions,
        mode=mode,
        grades=tuple(grades),
        positive=positive,
        orders=tuple(orders),
        temperature=temperature,
        max_tokens=max_tokens,
    )


# -- the judge prompt and its verdict ------------------------------------------------------------


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
        self.ledger = Ledger("metric")

    @property
    def config_hash(self) -> str:
        return self.config.config_hash

    @property
    def trace(self) -> tuple[JudgeCall, ...]:
        """Every judge call this scorer made, in order (cached ones included, flagged)."""
        with self._lock:
            return tuple(self._trace)

    def key(self, item: Item) -> Reply:
        """The item's first accepted answer, as a reply's text."""
        return Reply(text=accepted_answers(item, self.label)[0])

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
                error=str(exc),
            )
            with self._lock:
                self._trace.append(call)
            self.ledger.add(
                CallRecord(
                    role="metric",
                    model=config.model,
                    elapsed_ms=0.0,
                    attempts=exc.attempts,
                    ok=False,
                    error=str(exc),
                    item_id=item.id,
                )
            )
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
                )
            )
        self.ledger.add(
            CallRecord(
                role="metric",
                model=reply.model,
                elapsed_ms=reply.elapsed_ms,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cost_usd=reply.cost_usd,
                cached=reply.cached,
                attempts=reply.attempts,
                item_id=item.id,
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


# -- validation ----------------------------------------------------------------------------------


class Estimate(float):
    """A statistic with its percentile bootstrap interval: a float carrying `.low` and `.high`."""

    __slots__ = ("low", "high")
    low: float
    high: float

    def __new__(cls, value: float, low: float, high: float) -> Estimate:
        made = super().__new__(cls, value)
        made.low = float(low)
        made.high = float(high)
        return made

    def __reduce__(self) -> tuple[Any, ...]:
        return (Estimate, (float(self), self.low, self.high))

    def __repr__(self) -> str:
        return f"Estimate({float(self)!r}, low={self.low!r}, high={self.high!r})"

    def __str__(self) -> str:
        return f"{float(self):.3f} [{self.low:.3f}, {self.high:.3f}]"


_STATISTICS = ("accuracy", "kappa", "tpr", "tnr", "balanced_accuracy")


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeThresholds:
    """What a validation record must show before its judge may score.

    Defaults: at least 30 labelled items; accuracy >= 0.8; Cohen's kappa >= 0.6. A threshold set
    to None is not held. `bound` = "estimate" holds the point estimates, "low" the lower ends of
    their bootstrap intervals (stricter). See docs/scorers.md for why these defaults.
    """

    min_n: int = 30
    min_accuracy: float | None = 0.8
    min_kappa: float | None = 0.6
    min_tpr: float | None = None
    min_tnr: float | None = None
    min_balanced_accuracy: float | None = None
    bound: Literal["estimate", "low"] = "estimate"

    def __post_init__(self) -> None:
        if isinstance(self.min_n, bool) or not isinstance(self.min_n, int) or self.min_n < 1:
            raise ConfigError(f"thresholds: min_n {self.min_n!r}; give an int >= 1")
        for name in _STATISTICS:
            value = getattr(self, f"min_{name}")
            low = -1.0 if name == "kappa" else 0.0
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not low <= value <= 1
            ):
                raise ConfigError(
                    f"thresholds: min_{name} {value!r}; give a number in [{low:g}, 1] or None"
                )
        if self.bound not in ("estimate", "low"):
            raise ConfigError(f"thresholds: bound {self.bound!r}; give 'estimate' or 'low'")

    def describe(self) -> str:
        held = [f"n >= {self.min_n}"]
        for name in _STATISTICS:
            value = getattr(self, f"min_{name}")
            if value is not None:
                held.append(
                    f"{name}{' (interval low)' if self.bound == 'low' else ''} >= {value:g}"
                )
        return ", ".join(held)


DEFAULT_THRESHOLDS = JudgeThresholds()


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeValidation:
    """How well a judge agrees with blind human labels on the same items.

    Attributes:
        config_hash: the judge configuration the record was made for.
        n: labelled items.
        accuracy, kappa, tpr, tnr, balanced_accuracy: Estimates (a float with .low and .high, a
            percentile bootstrap interval at `level` over B resamples), or None when undefined.
            tpr is P(judge right | human right); tnr is P(judge wrong | human wrong).
        thresholds: the thresholds the record was held to when made.
        pairs: the (judge, human) decisions, one per item, in order (PPI's labelled set).
        ids: the items' ids, when known ("" each otherwise).
        B, seed, level: the bootstrap's resamples, seed and interval level.
        notes: which statistics are undefined and why, and other caveats.
        created: when the record was made (ISO-8601 UTC).
    """

    config_hash: str
    n: int
    accuracy: Estimate
    kappa: Estimate | None
    tpr: Estimate | None
    tnr: Estimate | None
    balanced_accuracy: Estimate | None
    thresholds: JudgeThresholds
    pairs: tuple[tuple[bool, bool], ...]
    ids: tuple[str, ...] = ()
    B: int = 200
    seed: int = 0
    level: float = 0.95
    notes: tuple[str, ...] = ()
    created: str = ""

    @property
    def judge_decisions(self) -> list[bool]:
        return [j for j, _ in self.pairs]

    @property
    def human_labels(self) -> list[bool]:
        return [h for _, h in self.pairs]

    @property
    def passes(self) -> bool:
        """Whether the record meets its own thresholds (judge_valid also checks the config)."""
        return not _threshold_problems(self, self.thresholds)

    @property
    def hash(self) -> str:
        """sha256 of the record's content (what a metric's source hash includes)."""
        return hashlib.sha256(self.to_json(created=False).encode()).hexdigest()

    def _as_dict(self, *, created: bool = True) -> dict[str, Any]:
        def stat(value: Estimate | None) -> dict[str, float] | None:
            if value is None:
                return None
            return {"value": float(value), "low": value.low, "high": value.high}

        out: dict[str, Any] = {
            "format": _RECORD_FORMAT,
            "version": _RECORD_VERSION,
            "config_hash": self.config_hash,
            "n": self.n,
            **{name: stat(getattr(self, name)) for name in _STATISTICS},
            "thresholds": asdict(self.thresholds),
            "B": self.B,
            "seed": self.seed,
            "level": self.level,
            "notes": list(self.notes),
            "pairs": [[j, h] for j, h in self.pairs],
            "ids": list(self.ids),
        }
        if created:
            out["created"] = self.created
        return out

    def to_json(self, *, created: bool = True) -> str:
        """The record as JSON text (what save() writes)."""
        return json.dumps(self._as_dict(created=created), indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, where: str = "validation record") -> JudgeValidation:
        """Read a record written by to_json(); the statistics are recomputed from the pairs and
        must agree with the ones written.

        Raises:
            ConfigError: not JSON, not a judge validation record, a newer version, a bad field,
                or statistics that do not follow from its pairs (the file was edited).
        """
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}:{exc.lineno}: not JSON ({exc.msg}); write it again with "
                "`skynet judge validate`"
            ) from None
        if not isinstance(raw, dict) or raw.get("format") != _RECORD_FORMAT:
            raise ConfigError(
                f'{where}: not a judge validation record (no "format": "{_RECORD_FORMAT}"); '
                "write one with `skynet judge validate`"
            )
        version = raw.get("version")
        if isinstance(version, int) and version > _RECORD_VERSION:
            raise ConfigError(
                f"{where}: judge validation record version {version} is newer than this Skynet "
                f"reads ({_RECORD_VERSION}); upgrade skynet"
            )
        try:
            data = _RecordFile.model_validate_json(text)  # strict, as JSON: arrays as pairs
        except ValidationError as exc:
            first = exc.errors()[0]
            key = ".".join(str(p) for p in first["loc"])
            raise ConfigError(
                f"{where}: field '{key}': {first['msg']}; write the record again with "
                "`skynet judge validate`"
            ) from None
        record = judge_validate(
            data.config_hash,
            {"judge": [p[0] for p in data.pairs], "human": [p[1] for p in data.pairs]},
            B=data.B,
            seed=data.seed,
            level=data.level,
            thresholds=JudgeThresholds(**data.thresholds.model_dump()),
            ids=data.ids or None,
        )
        for name in _STATISTICS:
            written, computed = getattr(data, name), getattr(record, name)
            same = (written is None and computed is None) or (
                written is not None
                and computed is not None
                and all(
                    math.isclose(a, b, abs_tol=1e-9)
                    for a, b in (
                        (written.value, float(computed)),
                        (written.low, computed.low),
                        (written.high, computed.high),
                    )
                )
            )
            if not same:
                raise ConfigError(
                    f"{where}: {name} does not follow from the record's pairs (the file was "
                    "edited); write it again with `skynet judge validate`"
                )
        return replace(record, created=data.created)

    def save(self, path: str | Path) -> Path:
        """Write the record as JSON to `path` (its folder must exist). Returns the path."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> JudgeValidation:
        """Read a record saved with save().

        Raises:
            ConfigError: the file is missing or unreadable, or from_json refuses it.
        """
        target = Path(path)
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(
                f"{target}: no judge validation record here; {HOW_TO_VALIDATE}"
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{target}: cannot read it ({exc}); check the path") from None
        return cls.from_json(text, where=str(target))


class _EstimateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    value: float
    low: float
    high: float


class _ThresholdsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min_n: int
    min_accuracy: float | None
    min_kappa: float | None
    min_tpr: float | None
    min_tnr: float | None
    min_balanced_accuracy: float | None
    bound: Literal["estimate", "low"]


class _RecordFile(BaseModel):
    """The record's file format, version 1."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    format: Literal["skynet-judge-validation"]
    version: Literal[1]
    config_hash: str
    n: int
    accuracy: _EstimateFile
    kappa: _EstimateFile | None
    tpr: _EstimateFile | None
    tnr: _EstimateFile | None
    balanced_accuracy: _EstimateFile | None
    thresholds: _ThresholdsFile
    B: int
    seed: int
    level: float
    notes: list[str]
    pairs: list[tuple[bool, bool]]
    ids: list[str]
    created: str = ""


def _as_bool(value: Any, where: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ConfigError(f"judge_validate: {where} is {value!r}; each decision is a bool")


def _pairs_of(labels: Any) -> list[tuple[bool, bool]]:
    if isinstance(labels, Mapping):
        missing = [k for k in ("judge", "human") if k not in labels]
        if missing:
            raise ConfigError(
                f"judge_validate: the labels mapping has no {', '.join(map(repr, missing))}; "
                'give {"judge": [...], "human": [...]}'
            )
        judge, human = list(labels["judge"]), list(labels["human"])
        if len(judge) != len(human):
            raise ConfigError(
                f"judge_validate: {len(judge)} judge decisions but {len(human)} human labels; "
                "give one of each per item, in the same order"
            )
        return [
            (_as_bool(j, f"judge[{i}]"), _as_bool(h, f"human[{i}]"))
            for i, (j, h) in enumerate(zip(judge, human, strict=True))
        ]
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise ConfigError(
            f"judge_validate: labels is a {type(labels).__name__}; give a sequence of (judge, "
            'human) bool pairs or {"judge": [...], "human": [...]}'
        )
    pairs = []
    for i, pair in enumerate(labels):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ConfigError(
                f"judge_validate: labels[{i}] is {pair!r}; each entry is a (judge, human) pair"
            )
        pairs.append((_as_bool(pair[0], f"labels[{i}][0]"), _as_bool(pair[1], f"labels[{i}][1]")))
    return pairs


def _statistics(j: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
    """Each statistic over the last axis; NaN where it is undefined."""
    n = j.shape[-1]
    agree = (j == h).mean(-1)
    positives = h.sum(-1)
    negatives = n - positives
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = np.where(positives > 0, (j & h).sum(-1) / positives, np.nan)
        tnr = np.where(negatives > 0, (~j & ~h).sum(-1) / negatives, np.nan)
        pj, ph = j.mean(-1), h.mean(-1)
        chance = pj * ph + (1 - pj) * (1 - ph)
        defined = (pj > 0) & (pj < 1) & (ph > 0) & (ph < 1)
        kappa = np.where(defined, (agree - chance) / (1 - chance), np.nan)
    return {
        "accuracy": agree,
        "kappa": kappa,
        "tpr": tpr,
        "tnr": tnr,
        "balanced_accuracy": (tpr + tnr) / 2,
    }


def judge_validate(
    config: JudgeConfig | str,
    labels: Any,
    B: int = 200,
    seed: int = 0,
    *,
    level: float = 0.95,
    thresholds: JudgeThresholds | None = None,
    ids: Sequence[str] | None = None,
) -> JudgeValidation:
    """Measure a judge's agreement with blind human labels on the same items.

    Args:
        config: the judge configuration the decisions came from (or its config_hash).
        labels: (judge, human) bool pairs, one per item, or {"judge": [...], "human": [...]}.
        B: bootstrap resamples for the intervals.
        seed: the bootstrap's seed (same pairs and seed, same record).
        level: the intervals' level.
        thresholds: what judge_valid holds the record to (default DEFAULT_THRESHOLDS).
        ids: the items' ids, kept in the record.

    Returns:
        A JudgeValidation. kappa is None when the human labels or the judge's decisions are all
        one class; tpr with no human positives; tnr with no human negatives; balanced_accuracy
        when either is. `notes` says which and why.

    Raises:
        ConfigError: no pairs, a decision that is not a bool, B < 1, a level outside (0, 1).
    """
    config_hash = config.config_hash if isinstance(config, JudgeConfig) else config
    if not isinstance(config_hash, str) or not config_hash:
        raise ConfigError("judge_validate: give the JudgeConfig the decisions came from")
    pairs = _pairs_of(labels)
    if not pairs:
        raise ConfigError(
            "judge_validate: no labelled pairs; label outputs with `skynet judge collect` first"
        )
    if isinstance(B, bool) or not isinstance(B, int) or B < 1:
        raise ConfigError(f"judge_validate: B = {B!r}; give an int >= 1 (e.g. 200)")
    if not 0 < level < 1:
        raise ConfigError(f"judge_validate: level = {level!r}; give a number in (0, 1)")
    if ids is not None and len(ids) != len(pairs):
        raise ConfigError(f"judge_validate: {len(ids)} ids for {len(pairs)} pairs; give one each")
    thresholds = thresholds or DEFAULT_THRESHOLDS
    n = len(pairs)
    j = np.array([p[0] for p in pairs], dtype=bool)
    h = np.array([p[1] for p in pairs], dtype=bool)
    point = _statistics(j, h)
    rng = np.random.default_rng(seed)
    index = rng.integers(0, n, size=(B, n))
    resampled = _statistics(j[index], h[index])
    tail = (1 - level) / 2 * 100
    notes: list[str] = []
    why = {
        "kappa": "the human labels or the judge's decisions are all one class, so agreement "
        "beyond chance cannot be measured",
        "tpr": "no item is labelled right by the human",
        "tnr": "no item is labelled wrong by the human",
        "balanced_accuracy": "it needs both tpr and tnr",
    }
    found: dict[str, Estimate | None] = {}
    for name in _STATISTICS:
        value = float(point[name])
        if math.isnan(value):
            found[name] = None
            notes.append(f"{name} is undefined: {why[name]}")
            continue
        draws = resampled[name][~np.isnan(resampled[name])]
        if len(draws) < B:
            notes.append(
                f"{name}: {B - len(draws)} of {B} resamples left it undefined (one class only) "
                "and are left out of its interval"
            )
        if len(draws) == 0:
            found[name] = Estimate(value, value, value)
            continue
        low, high = np.percentile(draws, [tail, 100 - tail])
        found[name] = Estimate(value, float(low), float(high))
    if n < thresholds.min_n:
        notes.append(f"only {n} labelled item(s); the thresholds ask for {thresholds.min_n}")
    accuracy = found["accuracy"]
    assert accuracy is not None  # defined whenever there is a pair
    return JudgeValidation(
        config_hash=config_hash,
        n=n,
        accuracy=accuracy,
        kappa=found["kappa"],
        tpr=found["tpr"],
        tnr=found["tnr"],
        balanced_accuracy=found["balanced_accuracy"],
        thresholds=thresholds,
        pairs=tuple(pairs),
        ids=tuple(str(i) for i in ids) if ids is not None else (),
        B=B,
        seed=seed,
        level=level,
        notes=tuple(notes),
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _threshold_problems(record: JudgeValidation, thresholds: JudgeThresholds) -> list[str]:
    problems: list[str] = []
    if record.n < thresholds.min_n:
        problems.append(
            f"n = {record.n} labelled items, fewer than the {thresholds.min_n} required"
        )
    for name in _STATISTICS:
        wanted = getattr(thresholds, f"min_{name}")
        if wanted is None:
            continue
        value = getattr(record, name)
        if value is None:
            reason = next((note for note in record.notes if note.startswith(f"{name} is")), "")
            problems.append(
                f"{name} is undefined ({reason.removeprefix(f'{name} is undefined: ')}), so it "
                f"cannot be held to >= {wanted:g}; label items of both classes"
            )
            continue
        shown = value.low if thresholds.bound == "low" else float(value)
        if shown < wanted:
            what = f"{name} interval low" if thresholds.bound == "low" else name
            problems.append(f"{what} {shown:.3f} is below {wanted:g}")
    return problems


def judge_problems(
    record: JudgeValidation | None, config: JudgeConfig, thresholds: JudgeThresholds | None = None
) -> list[str]:
    """Why `record` does not accept the judge `config` (empty: it does).

    Args:
        record: the validation record.
        config: the judge configuration that wants to score.
        thresholds: what to hold the record to (default: the thresholds it was made with).
    """
    if record is None:
        return ["there is no validation record"]
    if record.config_hash != config.config_hash:
        return [
            f"the validation record was made for judge config {record.config_hash[:12]}, not "
            f"this one ({config.config_hash[:12]}): the model, instructions, grades, orders or "
            "parameters changed since it was made"
        ]
    return _threshold_problems(record, thresholds or record.thresholds)


def judge_valid(
    record: JudgeValidation | None, config: JudgeConfig, thresholds: JudgeThresholds | None = None
) -> bool:
    """True when `record` was made for exactly this config and meets the thresholds (default:
    the record's own; judge_problems says why not)."""
    return not judge_problems(record, config, thresholds)


# -- the judge as a run's metric -----------------------------------------------------------------


def _item_id(input: Any) -> str:
    if isinstance(input, Mapping) and "id" in input:
        return str(input["id"])
    canonical = json.dumps(input, sort_keys=True, ensure_ascii=False, default=str)
    return "input-" + hashlib.sha256(canonical.encode()).hexdigest()[:10]


def judge_metric(scorer: JudgeScorer) -> Metric:
    """A validated judge scorer as a run's metric (a skynet.Metric).

    It returns (1.0 or 0.0, {"feedback": "outcome: detail", "outcome": outcome}); a judge call
    that fails after retries raises (the run records the item as an error, outcome judge_failed).
    Its answer key is the item's first accepted answer; its source hash covers the scorer's
    version, the config_hash, the validation record's hash and the label column.
    """
    from skynet.contract import Metric

    def score(
        input: Mapping[str, Any], output: Any, expected: Mapping[str, Any] | None = None
    ) -> tuple[float, dict[str, Any]]:
        item = Item(
            id=_item_id(input),
            input=dict(input) if isinstance(input, Mapping) else {},
            expected=dict(expected) if expected is not None else None,
        )
        verdict = scorer.score_output(item, output)
        return (1.0 if verdict.correct else 0.0), {
            "feedback": f"{verdict.reason}: {verdict.detail}",
            "outcome": verdict.reason,
        }

    def key(expected: Mapping[str, Any] | None) -> str:
        item = Item(id="key", input={}, expected=dict(expected) if expected is not None else None)
        return accepted_answers(item, scorer.label)[0]

    identity = json.dumps(
        ["judge", scorer.version, scorer.config_hash, scorer.validation.hash, scorer.label]
    )
    return Metric(
        score,
        name=f"judge {scorer.config_hash[:12]}",
        key_fn=key,
        source_hash=hashlib.sha256(identity.encode()).hexdigest(),
    )


# -- labelled rows: read a labels file, judge its outputs -------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LabelledRow:
    """One labelled row of a labels file, with the place it came from ("labels.jsonl:3")."""

    where: str
    id: str
    input: dict[str, Any]
    output: Any
    reference: Any
    human: bool


def read_labels(path: Path) -> list[LabelledRow]:
    """Read a labels file (JSONL, as collect writes it, "human" filled in with true/false).

    Raises:
        DatasetError: the file is missing, a line is not a JSON object, lacks a field, or has
            "human" null or not a bool; the message names the file and line.
    """
    text = read_text(
        path,
        what="labels",
        key="--labels",
        missing=f"no such labels file; write one with `skynet judge collect --out {path.name}`",
        error=DatasetError,
    )
    rows: list[LabelledRow] = []
    for parsed in read_jsonl(text, str(path)):
        where, row = parsed.where, parsed.values
        missing = [k for k in ("id", "output", "reference", "human") if k not in row]
        if missing:
            raise DatasetError(
                f"{where}: no {', '.join(map(repr, missing))}; each line has id, input, output, "
                "reference and human"
            )
        human = row["human"]
        if human is None:
            raise DatasetError(
                f"{where}: \"human\" is null (item '{row['id']}' is not labelled yet); set it "
                "to true (the output is right) or false"
            )
        if not isinstance(human, bool):
            raise DatasetError(f'{where}: "human" is {human!r}; set it to true or false')
        given = row.get("input") or {}
        if not isinstance(given, dict):
            raise DatasetError(f'{where}: "input" is a {type(given).__name__}, not an object')
        rows.append(
            LabelledRow(
                where=where,
                id=str(row["id"]),
                input=given,
                output=row["output"],
                reference=row["reference"],
                human=human,
            )
        )
    if not rows:
        raise DatasetError(f"{path}: no labelled rows; label the rows `skynet judge collect` wrote")
    return rows


def judge_labelled(
    config: JudgeConfig,
    rows: Sequence[LabelledRow],
    *,
    models: Models | None = None,
    governor: Governor | None = None,
) -> list[tuple[bool, bool]]:
    """The judge's decision beside the person's on each labelled row: (judge, human) pairs.

    The judge is not yet validated here (validation needs its decisions). A verdict it cannot
    settle counts as its "wrong", as when it scores a run.

    Raises:
        ModelError: a judge call failed after retries (naming the row).
    """
    judge = _Judge(config, models=models, governor=governor)
    pairs: list[tuple[bool, bool]] = []
    for row in rows:
        item = Item(id=row.id, input=row.input, expected={"reference": row.reference})
        try:
            decision = judge.decide(item, row.output)
        except DatasetError as exc:
            raise DatasetError(f"{row.where}: {exc}") from None
        if decision.outcome == JUDGE_FAILED:
            raise ModelError(f"{row.where}: {decision.detail}", model=config.model)
        pairs.append((decision.correct, row.human))
    return pairs
