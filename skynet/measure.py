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
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from time import (
    perf_counter_ns as _clock_ns,  # bound at import: later patches of time don't reach it
)
from time import thread_time_ns as _thread_cpu_ns

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
    # The same as intervals (start, end) of _clock_ns: the meter subtracts their union, so
    # calls that wait at once never take the same second off twice.
    waits: tuple[tuple[int, int], ...] = ()
    setup_cpu_ns: int = 0  # the calling thread's CPU time in that set-up (not the artifact's)
    cost_note: str = ""  # why cost_usd is None, when not for want of a price


# Private switch for tests: True takes each call's excluded_ns off on its own (the old formula,
# under which overlapping waits erased the candidate's own work); never set it in Skynet.
_SUBTRACT_EACH = False


def _union_ns(spans: Iterable[tuple[int, int]], low: int, high: int) -> int:
    """The length of the union of `spans`, clipped to [low, high]."""
    total, reach = 0, low
    for start, end in sorted((max(a, low), min(b, high)) for a, b in spans):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


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
        self._unknown_cost: set[str] = set()  # why a priced call's cost is unknown
        self._cached = 0
        # A cached call takes ~0 ms now but cost real time when first made: count that time.
        self._adjust_ns = 0
        # The sandbox's start-up and teardown are not the artifact's time: leave them out.
        self._framework_ns = 0
        # One-time set-up (weights, warm-up) and waiting for a governor slot are not the
        # artifact's time either, but they are left out as the union of their intervals, and
        # never below the artifact's CPU time: a candidate that waits on five calls at once
        # while it computes is timed at its computing, not at zero.
        self._waits: list[tuple[int, int]] = []
        self._each_ns = 0  # the old formula's sum (_SUBTRACT_EACH)
        self._cpu_ns: int | None = None  # the CPU time an artifact measured (a sandbox's tree)
        self._thread_cpu_start = 0
        self._thread_cpu = 0  # the evaluating thread's CPU time: the floor of in-process runs
        self._setup_cpu_ns = 0  # CPU time calls spent in one-time set-up: out of that floor
        # Calls started under this meter and not yet ended: the evaluation waits for them, so
        # a call still in flight when the candidate answered is the item's cost too.
        self._in_flight = 0
        self._idle = threading.Condition(self._lock)

    def start(self) -> None:
        self._start_ns = _clock_ns()
        self._thread_cpu_start = _thread_cpu_ns()

    def stop(self) -> None:
        if self._stop_ns is None:
            self._stop_ns = _clock_ns()
            self._thread_cpu = _thread_cpu_ns() - self._thread_cpu_start

    def add_cpu_ns(self, ns: int) -> None:
        """Count `ns` of CPU time the artifact's run used, measured by the framework (a
        sandbox's process tree): the item's time is never below it. Without it, the evaluating
        thread's own CPU time is the floor."""
        with self._lock:
            self._cpu_ns = (self._cpu_ns or 0) + max(0, ns)

    def call_started(self) -> None:
        """A model call began under this meter (skynet.models registers every call)."""
        with self._lock:
            self._in_flight += 1

    def call_ended(self) -> None:
        """The call call_started() announced ended (answered, failed or refused)."""
        with self._lock:
            self._in_flight -= 1
            if self._in_flight <= 0:
                self._idle.notify_all()

    @property
    def in_flight(self) -> int:
        """Model calls started under this meter and not ended yet."""
        with self._lock:
            return self._in_flight

    def wait_calls(self, timeout: float | None = None) -> bool:
        """Block until no call started under this meter is in flight; False on time-out."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight <= 0, timeout)

    def exclude_ns(self, ns: int) -> None:
        """Leave `ns` of framework time (a sandbox's start-up and teardown) out of the item's."""
        with self._lock:
            self._framework_ns += max(0, ns)

    def add_call(self, call: CallFigures) -> None:
        with self._lock:
            self._calls += 1
            self._input_tokens += call.input_tokens
            self._output_tokens += call.output_tokens
            if call.cost_usd is None and call.cost_note:
                self._unknown_cost.add(call.cost_note)
            elif call.cost_usd is None:
                self._unpriced.add(call.model)
            else:
                self._cost += call.cost_usd
            self._each_ns += call.excluded_ns
            self._waits.extend(call.waits)
            self._setup_cpu_ns += call.setup_cpu_ns
            if call.cached:
                self._cached += 1
                self._adjust_ns += call.elapsed_ns - call.lookup_ns

    def _elapsed_ns(self, end: int) -> tuple[int, int]:
        """(the item's time, the waiting left in it because the CPU time floors it).

        Wall time (less the sandbox's start-up and teardown) less the union of the waits on
        the model, but never less than the CPU time of the run (or its wall time, when it
        ran on several cores), plus what cached calls took when first made.
        """
        assert self._start_ns is not None
        run = max(0, end - self._start_ns - self._framework_ns)
        if _SUBTRACT_EACH:
            return max(0, run + self._adjust_ns - self._each_ns), 0
        waited = _union_ns(self._waits, self._start_ns, end)
        if self._cpu_ns is not None:
            cpu = self._cpu_ns
        else:
            # The evaluating thread's CPU time less the set-up's: a call made on another
            # thread only lowers this floor (never raises the item's time past its due).
            cpu = max(0, self._thread_cpu - self._setup_cpu_ns)
        taken = min(waited, max(0, run - cpu))
        return max(0, run - taken + self._adjust_ns), waited - taken

    def observation(self) -> Observation:
        """A new frozen Observation of the figures so far (the meter keeps its own)."""
        if self._start_ns is None:
            raise RuntimeError("Meter.observation() before start()")
        end = self._stop_ns if self._stop_ns is not None else _clock_ns()
        with self._lock:
            elapsed_ns, kept_ns = self._elapsed_ns(end)
            elapsed_ms = elapsed_ns / 1e6
            notes = []
            if self._cached:
                notes.append(
                    f"{self._cached} of {self._calls} model call(s) served from the cache; "
                    "their time is the time measured when first made"
                )
            if kept_ns >= 1_000_000:
                notes.append(
                    f"{kept_ns / 1e6:.0f} ms of waiting on the model overlapped the "
                    "candidate's own CPU work and was counted"
                )
            time_note = "; ".join(notes)
            if self._unpriced:
                cost: float | None = None
                models = ", ".join(sorted(self._unpriced))
                cost_note = (
                    f"cost not measurable: no known price for {models}; declare one under "
                    f'[models.prices."{sorted(self._unpriced)[0]}"] in skynet.toml'
                )
            elif self._unknown_cost:
                cost = None
                cost_note = f"cost not measurable: {'; '.join(sorted(self._unknown_cost))}"
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
