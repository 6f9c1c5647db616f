"""The contract on what score() returns, and the names of the checks: `validate_return` holds a
return value to it (the check named "Metric return value") and makes a `MetricResult`.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from skynet.errors import ContractError

RETURN_VALUE = "Metric return value"
ANSWER_KEY = "answer key"
NULL_CONTROL = "null control"
METRIC_ERROR = "Metric error"
UNDECLARED_REASON = "undeclared reason"
SIGNATURE = "Metric signature"
METRIC_FILE = "Metric file"
# The key of a result's extra that holds what score() printed (cut to limits.feedback_chars).
STDOUT_KEY = "metric_stdout"
# The key of a timed-out result's extra that holds the limit it ran past (metric.time_s then): a
# resumed run scores the item again when metric.time_s was raised since.
TIMED_OUT_KEY = "metric_timed_out_s"


_FIX = 'return a pair (score, {"feedback": "what is wrong and what right looks like"})'

_short = reprlib.Repr()
_short.maxstring = 120
_short.maxother = 120
_short.maxlist = _short.maxtuple = _short.maxdict = 6


def _shown(value: Any, limit: int = 200) -> str:
    text = _short.repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Limits on one metric call; each is a clear error or a recorded note, never a silent cut."""

    time_s: float | None = 60.0
    feedback_chars: int = 4000
    max_scores: int = 32


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricResult:
    """A validated metric return value.

    Attributes:
        score: the score as a float.
        feedback: the feedback text (cut to the limit, with a note, when longer).
        scores: named scores (str -> float).
        extra: any other keys of the returned dict, kept and shown to the reflection model;
            "metric_stdout" holds what score() printed, if anything (kept off the report's stdout).
        notes: what Skynet did to the value (e.g. cut the feedback).
    """

    score: float
    feedback: str
    scores: dict[str, float] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _is_score(value: Any) -> bool:
    # numbers.Real covers int, float, Fraction and numpy's scalar types; bool is not a score.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _why_not_score(value: Any) -> str:
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):
        return "a bool is not a score; return 1.0 or 0.0"
    if value is None:
        return "the score is None"
    if isinstance(value, numbers.Real):
        return "the score is not finite (NaN or infinity)"
    if isinstance(value, str):
        return "the score is a str; return a number such as 1.0"
    if type(value).__name__ == "ndarray":
        return "the score is a numpy array; return one number, e.g. float(x.mean())"
    return f"the score is a {type(value).__name__}, not a real number"


def validate_return(
    value: Any,
    *,
    item_id: str | None = None,
    where: str = "metric.py",
    limits: Limits | None = None,
) -> MetricResult:
    """Check a metric's return value against the contract (the check named "Metric return value").

    Raises:
        ContractError: with check == "Metric return value", naming the item, showing what came
            back (cut to ~200 characters) and how to fix it.
    """
    limits = limits or Limits()
    item = f" for item '{item_id}'" if item_id is not None else ""

    def fail(what: str, fix: str = _FIX) -> ContractError:
        return ContractError(
            f"{RETURN_VALUE} check failed{item} ({where}): {what}; got {_shown(value)}. Fix: {fix}",
            check=RETURN_VALUE,
            item_id=item_id,
        )

    if not isinstance(value, (tuple, list)):
        raise fail(f"score() returned a {type(value).__name__}, not a pair")
    if len(value) != 2:
        raise fail(f"score() returned a {len(value)}-{type(value).__name__}, not a pair")
    raw_score, info = value
    if not _is_score(raw_score):
        raise fail(_why_not_score(raw_score))
    if not isinstance(info, Mapping):
        raise fail(
            f"the second element is a {type(info).__name__}, not a dict",
            'return (score, {"feedback": "..."}) with a dict as the second element',
        )
    if "feedback" not in info:
        raise fail(
            'the dict has no "feedback" key',
            'add "feedback": a str saying what is wrong and what right looks like',
        )
    feedback = info["feedback"]
    if not isinstance(feedback, str):
        raise fail(
            f'"feedback" is a {type(feedback).__name__}, not a str',
            'make "feedback" a str (join a list of notes with "\\n")',
        )
    scores: dict[str, float] = {}
    raw_scores = info.get("scores", {})
    if raw_scores is None:
        raw_scores = {}
    if not isinstance(raw_scores, Mapping):
        raise fail(
            f'"scores" is a {type(raw_scores).__name__}, not a dict',
            'make "scores" a dict of name -> number, e.g. {"format": 1.0}',
        )
    if len(raw_scores) > limits.max_scores:
        raise fail(
            f'"scores" has {len(raw_scores)} entries; the limit is {limits.max_scores}',
            "return fewer named scores (aggregate them), or raise limits.max_scores",
        )
    for name, sub in raw_scores.items():
        if not isinstance(name, str):
            raise fail(f'"scores" has a non-str key {name!r}', "name every score with a str")
        if not _is_score(sub):
            raise fail(
                f'"scores"["{name}"]: {_why_not_score(sub)}',
                'make every value in "scores" a finite number',
            )
        scores[name] = float(sub)
    notes: list[str] = []
    if len(feedback) > limits.feedback_chars:
        notes.append(
            f"feedback cut from {len(feedback)} to {limits.feedback_chars} characters "
            "(limit: feedback_chars)"
        )
        feedback = feedback[: limits.feedback_chars]
    extra = {k: v for k, v in info.items() if k not in ("feedback", "scores")}
    return MetricResult(
        score=float(raw_score), feedback=feedback, scores=scores, extra=extra, notes=tuple(notes)
    )
