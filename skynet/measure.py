"""The meter: time and task-model cost of one item, measured by the framework alone.

The clock functions are bound when this module is imported, so code under optimization that
patches `time.perf_counter` or `time.monotonic` later does not move the figures. The figures live
in the Meter; what user code is handed is a fresh frozen Observation built from them, so mutating
it changes nothing that is recorded.

Context is carried in contextvars: each thread and each asyncio task sees its own meter, so two
items evaluated at once never mix their figures.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from time import (
    perf_counter_ns as _clock_ns,  # bound at import: later patches of time don't reach it
)

from skynet.errors import NotMeasuring

__all__ = ["Observation", "Meter", "metering", "scoring", "observation", "service_cost"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """What the framework measured while the artifact ran on one item.

    Attributes:
        elapsed_ms: wall time of the artifact's run on the item. A task-model call served from
            the cache counts with the time measured when it was first made.
        model_calls: task-model calls made during the run.
        input_tokens: prompt tokens over those calls.
        output_tokens: completion tokens over those calls.
        cost_usd: task-model cost in USD, or None when some call's price is unknown.
        cost_note: why cost_usd is None, or how it was made up ("" when plain).
        time_note: anything that qualifies elapsed_ms ("" when plain).
        cache_hit: True when at least one task-model call was served from the cache.
    """

    elapsed_ms: float
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    cost_note: str = ""
    time_note: str = ""
    cache_hit: bool = False

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__slots__}  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFigures:
    """One task-model call as the meter needs it (filled in by skynet.models)."""

    model: str
    elapsed_ns: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cached: bool
    lookup_ns: int = 0  # time actually spent serving a cached call
    excluded_ns: int = 0  # one-time set-up and waiting for a governor slot: not the model's time


class Meter:
    """Accumulates the figures of one item. Only the framework creates and feeds meters."""

    def __init__(self, item_id: str | None = None) -> None:
        self.item_id = item_id
        self._lock = threading.Lock()
        self._start_ns: int | None = None
        self._stop_ns: int | None = None
        self._calls = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._cost = 0.0
        self._unpriced: set[str] = set()
        self._cached = 0
        # A cached call takes ~0 ms now but cost real time when first made: count that time.
        # One-time set-up (weights, warm-up) and waiting for a governor slot are not the
        # artifact's time: leave them out.
        self._adjust_ns = 0

    def start(self) -> None:
        self._start_ns = _clock_ns()

    def stop(self) -> None:
        if self._stop_ns is None:
            self._stop_ns = _clock_ns()

    def exclude_ns(self, ns: int) -> None:
        """Leave `ns` of framework time (a sandbox's start-up and teardown) out of the item's."""
        with self._lock:
            self._adjust_ns -= max(0, ns)

    def add_call(self, call: CallFigures) -> None:
        with self._lock:
            self._calls += 1
            self._input_tokens += call.input_tokens
            self._output_tokens += call.output_tokens
            if call.cost_usd is None:
                self._unpriced.add(call.model)
            else:
                self._cost += call.cost_usd
            self._adjust_ns -= call.excluded_ns
            if call.cached:
                self._cached += 1
                self._adjust_ns += call.elapsed_ns - call.lookup_ns

    def observation(self) -> Observation:
        """A new frozen Observation of the figures so far (the meter keeps its own)."""
        if self._start_ns is None:
            raise RuntimeError("Meter.observation() before start()")
        end = self._stop_ns if self._stop_ns is not None else _clock_ns()
        with self._lock:
            elapsed_ms = max(0, end - self._start_ns + self._adjust_ns) / 1e6
            time_note = ""
            if self._cached:
                time_note = (
                    f"{self._cached} of {self._calls} model call(s) served from the cache; "
                    "their time is the time measured when first made"
                )
            if self._unpriced:
                cost: float | None = None
                models = ", ".join(sorted(self._unpriced))
                cost_note = (
                    f"cost not measurable: no known price for {models}; declare one under "
                    f'[models.prices."{sorted(self._unpriced)[0]}"] in skynet.toml'
                )
            else:
                cost = self._cost
                cost_note = "" if self._calls else "no task-model calls"
            return Observation(
                elapsed_ms=elapsed_ms,
                model_calls=self._calls,
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cost_usd=cost,
                cost_note=cost_note,
                time_note=time_note,
                cache_hit=self._cached > 0,
            )


# The meter of the artifact run in progress in this context (task-model calls add to it).
_active_meter: ContextVar[Meter | None] = ContextVar("skynet_active_meter", default=None)
# The figures a metric call in progress may read through observation(): (observation, source).
_scoring: ContextVar[tuple[Observation, str] | None] = ContextVar("skynet_scoring", default=None)

EVALUATION = "evaluation"
TESTING = "testing"


def active_meter() -> Meter | None:
    """The meter of the artifact run in progress in this context, if any."""
    return _active_meter.get()


def in_evaluation() -> bool:
    """True inside a metered artifact run or inside the metric call of an evaluation."""
    scoring_now = _scoring.get()
    return _active_meter.get() is not None or (
        scoring_now is not None and scoring_now[1] == EVALUATION
    )


@contextlib.contextmanager
def metering(item_id: str | None = None) -> Iterator[Meter]:
    """Run the artifact on one item inside this: task-model calls made meanwhile are summed."""
    meter = Meter(item_id)
    token = _active_meter.set(meter)
    meter.start()
    try:
        yield meter
    finally:
        meter.stop()
        _active_meter.reset(token)


@contextlib.contextmanager
def scoring(obs: Observation, *, source: str = EVALUATION) -> Iterator[None]:
    """Call the metric inside this: observation() and service_cost() return `obs`."""
    token = _scoring.set((obs, source))
    try:
        yield
    finally:
        _scoring.reset(token)


def current_observation() -> Observation | None:
    """The Observation of the item being scored, or None outside a metric call."""
    scoring_now = _scoring.get()
    return None if scoring_now is None else scoring_now[0]


def observation() -> Observation:
    """The frozen Observation of the item being scored.

    Raises:
        NotMeasuring: outside a metric call (for unit tests of a metric, wrap the call in
            `skynet.testing.observing(...)`).
    """
    obs = current_observation()
    if obs is None:
        raise NotMeasuring(
            "observation() was called outside a metric call: Skynet measures an item only while "
            "it scores it. In a unit test of metric.py, wrap the call in "
            "skynet.testing.observing(elapsed_ms=..., cost_usd=...)."
        )
    return obs


def service_cost() -> float | None:
    """The task-model cost in USD of the item being scored, or None when not measurable.

    Raises:
        NotMeasuring: outside a metric call.
    """
    scoring_now = _scoring.get()
    if scoring_now is None:
        raise NotMeasuring(
            "service_cost() was called outside a metric call: Skynet measures an item only while "
            "it scores it. In a unit test of metric.py, wrap the call in "
            "skynet.testing.observing(cost_usd=...)."
        )
    return scoring_now[0].cost_usd
