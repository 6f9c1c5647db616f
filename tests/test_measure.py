"""The meter and observation(): figures user code can read but cannot move."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

import pytest

import skynet
from skynet import Item, NotMeasuring, SkynetError
from skynet.contract import Metric
from skynet.measure import CallFigures, metering
from skynet.testing import observing


def test_observation_and_service_cost_raise_outside_a_metric_call():
    with pytest.raises(NotMeasuring, match="outside a metric call"):
        skynet.observation()
    with pytest.raises(NotMeasuring, match="outside a metric call"):
        skynet.service_cost()


def test_observing_gives_figures_to_unit_tests():
    with observing(elapsed_ms=120, cost_usd=0.003, model_calls=2) as obs:
        assert skynet.observation() == obs
        assert skynet.observation().elapsed_ms == 120
        assert skynet.service_cost() == 0.003
    with pytest.raises(NotMeasuring):
        skynet.observation()


def test_observing_refuses_inside_a_metered_evaluation():
    seen = {}

    def score(input, output, expected=None):
        try:
            with observing(elapsed_ms=0, cost_usd=0.0):
                pass
        except SkynetError as exc:
            seen["error"] = str(exc)
        return 1.0, {"feedback": ""}

    def run(candidate, inp):
        try:
            with observing(elapsed_ms=0):
                pass
        except SkynetError as exc:
            seen["run_error"] = str(exc)
        return "x"

    skynet.Evaluation(Metric(score), run)("c", Item("i", {}, {"y": "x"}))
    assert "inside a metered evaluation" in seen["error"]
    assert "inside a metered evaluation" in seen["run_error"]


def test_the_observation_is_frozen():
    with observing(elapsed_ms=5) as obs, pytest.raises(dataclasses.FrozenInstanceError):
        obs.elapsed_ms = 0  # type: ignore[misc]


def test_patching_the_clock_or_mutating_the_observation_changes_nothing(monkeypatch):
    handed = {}

    def run(candidate, inp):
        # The code under optimization tries to look fast: stop every clock in `time`.
        for name in ("perf_counter", "monotonic", "time"):
            monkeypatch.setattr(time, name, lambda: 0.0)
        for name in ("perf_counter_ns", "monotonic_ns", "time_ns"):
            monkeypatch.setattr(time, name, lambda: 0)
        threading.Event().wait(0.15)
        return "answer"

    def score(input, output, expected=None):
        obs = skynet.observation()
        handed["before"] = obs.elapsed_ms
        object.__setattr__(obs, "elapsed_ms", 0.0)  # bypass frozen: still must not matter
        object.__setattr__(obs, "cost_usd", -5.0)
        handed["again"] = skynet.observation().elapsed_ms
        return 1.0, {"feedback": ""}

    result = skynet.Evaluation(Metric(score), run)("c", Item("i", {}, {"y": "answer"}))
    monkeypatch.undo()
    assert result.ok, result.error
    assert result.observation.elapsed_ms >= 150
    assert handed["before"] >= 150
    assert result.observation.cost_usd == 0.0


def test_a_cached_call_counts_with_its_first_measured_time():
    with metering("i") as meter:
        meter.add_call(
            CallFigures(
                model="m",
                elapsed_ns=400_000_000,
                input_tokens=3,
                output_tokens=2,
                cost_usd=0.5,
                cached=True,
                lookup_ns=1000,
            )
        )
    obs = meter.observation()
    assert obs.elapsed_ms >= 400
    assert obs.cache_hit and "served from the cache" in obs.time_note
    assert obs.cost_usd == 0.5 and obs.model_calls == 1


def test_an_unpriced_call_makes_cost_unmeasurable_never_zero():
    with metering("i") as meter:
        meter.add_call(
            CallFigures(
                model="openai/mystery",
                elapsed_ns=1,
                input_tokens=1,
                output_tokens=1,
                cost_usd=None,
                cached=False,
            )
        )
        meter.add_call(
            CallFigures(
                model="m",
                elapsed_ns=1,
                input_tokens=1,
                output_tokens=1,
                cost_usd=0.25,
                cached=False,
            )
        )
    obs = meter.observation()
    assert obs.cost_usd is None
    assert "openai/mystery" in obs.cost_note and "models.prices" in obs.cost_note


def test_meters_of_concurrent_threads_never_mix():
    barrier = threading.Barrier(2)
    results = {}

    def worker(name, cost):
        with metering(name) as meter:
            barrier.wait()
            from skynet.measure import active_meter

            active_meter().add_call(
                CallFigures(
                    model="m",
                    elapsed_ns=0,
                    input_tokens=1,
                    output_tokens=1,
                    cost_usd=cost,
                    cached=False,
                )
            )
            barrier.wait()
        results[name] = meter.observation()

    threads = [threading.Thread(target=worker, args=(n, c)) for n, c in (("a", 1.0), ("b", 2.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["a"].cost_usd == 1.0 and results["b"].cost_usd == 2.0
    assert results["a"].model_calls == results["b"].model_calls == 1


def test_meters_of_concurrent_asyncio_tasks_never_mix():
    from skynet.measure import active_meter

    async def item(name, cost, delay):
        with metering(name) as meter:
            await asyncio.sleep(delay)
            active_meter().add_call(
                CallFigures(
                    model="m",
                    elapsed_ns=0,
                    input_tokens=1,
                    output_tokens=1,
                    cost_usd=cost,
                    cached=False,
                )
            )
            await asyncio.sleep(delay)
        return meter.observation()

    async def main():
        return await asyncio.gather(item("a", 1.0, 0.02), item("b", 2.0, 0.01))

    a, b = asyncio.run(main())
    assert (a.cost_usd, b.cost_usd) == (1.0, 2.0)
