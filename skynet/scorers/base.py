"""What a scorer is: the Scorer protocol and the values it reads and returns.

A reply reaches a scorer as the server returned it (text, tool calls with their raw arguments
text, whether it stopped at the token limit); the scorer answers with a Verdict.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from skynet.data import Item

__all__ = ["Call", "Reply", "Scorer", "GradedScorer", "Verdict", "EMPTY_REPLY"]


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call as the server returned it.

    Attributes:
        name: the tool the call names.
        arguments: the raw arguments text, unparsed (a scorer decides how strictly to read it).
    """

    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Reply:
    """A model's reply as the server returned it.

    Attributes:
        text: the reply's text content ("" when there was none).
        calls: the tool calls the server parsed out of the reply, in order.
        truncated: True when the reply stopped at the token limit.
    """

    text: str = ""
    calls: tuple[Call, ...] = ()
    truncated: bool = False

    def __post_init__(self) -> None:
        # A list of calls is accepted and kept as a tuple, so a Reply stays hashable and frozen.
        if not isinstance(self.calls, tuple):
            object.__setattr__(self, "calls", tuple(self.calls))


EMPTY_REPLY = Reply()


@dataclass(frozen=True, slots=True)
class Verdict:
    """A scorer's judgement of one reply.

    Attributes:
        correct: whether the reply is right.
        reason: one of the scorer's declared reasons, e.g. "match" or "no-call".
        detail: plain words saying why, for a person or a reflection model to read.
    """

    correct: bool
    reason: str
    detail: str = ""


@runtime_checkable
class Scorer(Protocol):
    """A reusable metric with a name, a version and a declared set of reasons.

    Contract:
      - `version` changes whenever scoring changes; it is recorded with every result.
      - `score` returns a Verdict whose reason is one of `reasons`, for every reply, however
        malformed: a malformed reply is a wrong answer with a reason, never an exception.
      - `score` raises only when it cannot judge the item at all (e.g. the item has no answer);
        that is recorded as an error, never as a wrong answer.
      - `key(item)` is the reply a model that got the item right would return; scored, it is
        correct.
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def reasons(self) -> Collection[str]: ...

    def key(self, item: Item) -> Reply: ...

    def score(self, item: Item, reply: Reply) -> Verdict: ...


@runtime_checkable
class GradedScorer(Protocol):
    """A scorer that grades in [0, 1] instead of giving a right/wrong Verdict (e.g. `reference`).

    Contract:
      - `version` changes whenever scoring changes; `config_hash` covers the version and every
        setting that decides a grade, so results graded under another hash are stale.
      - `metric_result(item, output)` returns the metric contract's pair, (grade in [0, 1],
        {"feedback": str, "scores": {name: number}}), for every output however malformed: a
        malformed output is a low grade with feedback, never an exception.
      - it raises only when it cannot judge the item at all (e.g. the item has no reference).
      - `key(item)` is the output a model that got the item right would return; it grades 1.0.
    """

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def config_hash(self) -> str: ...

    def key(self, item: Item) -> Any: ...

    def metric_result(self, item: Item, output: Any) -> tuple[float, dict[str, Any]]: ...
