"""Time and cost a code candidate cannot fake (issue 25): waits on the model that overlap are
taken off once, never below the candidate's CPU time; calls still in flight when it answers are
the item's, on threads and on worker processes; a candidate's max_tokens is capped at
[artifact] max_tokens. Each attack has its control: the old formula, or the defence switched off.
"""

from __future__ import annotations

import contextvars
import functools
import textwrap
import threading
import time

import pytest

import skynet.measure as measure
from skynet.artifacts.code import CodeArtifact
from skynet.contract import Metric
from skynet.data import Item
from skynet.errors import BudgetExhausted
from skynet.evaluation import Evaluation
from skynet.measure import CallFigures, Meter, metering
from skynet.models import using
from skynet.sandbox import _proxy
from skynet.testing.server import ScriptedServer, reply

PRICE = {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}  # the loopback model's, declared

CONCURRENT = """
import threading, time
from skynet_sandbox import complete

def run(input):
    got = []
    threads = [threading.Thread(target=lambda i=i: got.append(complete(f"q{i}", max_tokens=4)))
               for i in range(5)]
    for t in threads:
        t.start()
    began = time.process_time()
    while time.process_time() - began < 2.0:  # its own work, while the calls wait their turn
        pass
    for t in threads:
        t.join()
    return {"answers": len(got)}
"""

SEQUENTIAL = """
from skynet_sandbox import complete

def run(input):
    return {"answers": [complete(f"q{i}", max_tokens=4) for i in range(5)]}
"""

LEAVES_CALLS_BEHIND = """
import threading, time
from skynet_sandbox import complete

def run(input):
    for i in range(3):
        threading.Thread(target=complete, args=(f"slow {i}",), kwargs={"max_tokens": 4},
                         daemon=True).start()
    time.sleep(0.3)  # the requests are out; the answer goes now, the calls still in flight
    return {"total": input["n"] * (input["n"] + 1) // 2}
"""


def _both(meter: Meter, monkeypatch: pytest.MonkeyPatch) -> tuple[float, float]:
    """(the item's time in ms, the old formula's) from the same meter."""
    new = meter.observation().elapsed_ms
    monkeypatch.setattr(measure, "_SUBTRACT_EACH", True)
    old = meter.observation().elapsed_ms
    monkeypatch.setattr(measure, "_SUBTRACT_EACH", False)
    return new, old


def _run_code(server: ScriptedServer, tmp_path, source: str, **models_kw) -> Meter:
    models = server.models(tmp_path, **models_kw)
    # litellm's import, once per process, is set-up: done here, out of the candidate's wall limit
    models.complete("task", [{"role": "user", "content": "warm-up"}])
    with using(models), metering("i1") as meter:
        CodeArtifact(source=source).run({"code": source}, {"n": 3})
    return meter


# -- time -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("waits", "union"),
    [
        ([], 0),
        ([(0, 10)], 10),
        ([(0, 10), (5, 15)], 15),  # overlapping: the same second is taken off once
        ([(0, 10), (0, 10), (0, 10)], 10),
        ([(0, 10), (20, 30)], 20),
        ([(-5, 5), (95, 120)], 10),  # clipped to the item's run
    ],
)
def test_the_union_of_the_waits(waits, union):
    assert measure._union_ns(waits, 0, 100) == union


def _waited(span: tuple[int, int], **figures: int) -> CallFigures:
    """A free call whose only figure is the time it waited over `span`."""
    return CallFigures(
        model="m",
        elapsed_ns=0,
        input_tokens=0,
        output_tokens=0,
        cost_usd=0.0,
        cached=False,
        waits=(span,),
        **figures,
    )


def test_waits_never_take_off_the_cpu_time():
    meter = Meter("i")
    meter.start()
    start = meter._start_ns
    meter.stop()
    meter._stop_ns = start + 1_000_000_000  # a 1 s run
    meter.add_cpu_ns(800_000_000)
    for _ in range(5):  # five calls that waited 1 s at once
        meter.add_call(_waited((start, start + 1_000_000_000), excluded_ns=1_000_000_000))
    obs = meter.observation()
    assert obs.elapsed_ms == pytest.approx(800)  # its CPU time
    assert "overlapped" in obs.time_note


@pytest.mark.slow
def test_the_cpu_time_of_one_time_set_up_is_not_the_floor_of_an_in_process_run():
    """litellm's import (set-up) runs on the evaluating thread: its CPU time is left out of the
    floor as its wall time is left out of the item's."""

    def busy(ns: int) -> None:
        began = time.thread_time_ns()
        while time.thread_time_ns() - began < ns:
            pass

    figures = {}
    for told in (True, False):
        with metering("i") as meter:
            began, cpu = time.perf_counter_ns(), time.thread_time_ns()
            busy(300_000_000)  # the set-up
            setup = (began, time.perf_counter_ns())
            meter.add_call(_waited(setup, setup_cpu_ns=time.thread_time_ns() - cpu if told else 0))
        figures[told] = meter.observation().elapsed_ms
    assert figures[True] < 100
    assert figures[False] >= 250  # control: counted as the run's own CPU work


@pytest.mark.slow
@pytest.mark.parametrize("waits", [True, False])
def test_a_thread_an_in_process_program_leaves_calling_is_the_items(tmp_path, monkeypatch, waits):
    if not waits:  # control: the evaluation does not wait for the meter's calls
        monkeypatch.setattr(Meter, "wait_calls", lambda self, timeout=None: True)

    def program(candidate, input):
        call = functools.partial(models.complete, "task", [{"role": "user", "content": "q"}])
        left.append(threading.Thread(target=contextvars.copy_context().run, args=(call,)))
        left[-1].start()
        return "at once"

    left: list[threading.Thread] = []

    with ScriptedServer(default=reply("late", latency_s=0.5)) as server:
        models = server.models(tmp_path, **PRICE)
        evaluation = Evaluation(Metric(lambda input, output, expected=None: 1.0), program)
        with using(models):
            result = evaluation("c", Item("i", {}))
        for thread in left:  # the control's stray call ends before the server does
            thread.join()
    assert result.observation is not None
    assert result.observation.model_calls == (1 if waits else 0)


@pytest.mark.slow
def test_five_concurrent_calls_do_not_erase_two_seconds_of_work(tmp_path, monkeypatch):
    with ScriptedServer(default=reply("a", latency_s=0.6)) as server:
        meter = _run_code(server, tmp_path, CONCURRENT, max_concurrent=1)
        assert server.request_count == 6  # the warm-up and five
    new, old = _both(meter, monkeypatch)
    assert meter.observation().model_calls == 5
    assert new >= 1900  # at least the 2 s of CPU it computed
    assert old < new / 2  # control: each wait taken off on its own erased the work


@pytest.mark.slow
def test_calls_made_one_after_another_keep_their_figure(tmp_path, monkeypatch):
    with ScriptedServer(default=reply("a", latency_s=0.1)) as server:
        meter = _run_code(server, tmp_path, SEQUENTIAL, max_concurrent=1)
    new, old = _both(meter, monkeypatch)
    assert meter.observation().model_calls == 5
    assert new >= 500  # the five calls' own time is the candidate's
    assert new == pytest.approx(old, rel=0.02)


@pytest.mark.slow
def test_the_sandbox_measures_its_trees_cpu_time():
    source = textwrap.dedent(
        """
        import time
        def run(input):
            began = time.process_time()
            while time.process_time() - began < 0.5:
                pass
            return 1
        """
    )
    with metering("i") as meter:
        CodeArtifact(source=source).run({"code": source}, {})
    assert meter._cpu_ns is not None and 0.45e9 <= meter._cpu_ns <= 1.5e9


# -- calls still in flight ------------------------------------------------------------------
def _evaluation(models) -> Evaluation:
    art = CodeArtifact(source=LEAVES_CALLS_BEHIND)
    return Evaluation(Metric(lambda input, output, expected=None: 1.0), art.task(models, None))


@pytest.mark.slow
def test_calls_left_in_flight_are_the_items_on_threads(tmp_path):
    with ScriptedServer(default=reply("late", latency_s=1.0)) as server:
        server.bill(**PRICE)
        models = server.models(tmp_path, **PRICE)
        with using(models):
            result = _evaluation(models)({"code": LEAVES_CALLS_BEHIND}, Item("n2", {"n": 2}))
        billed = server.billed_usd
    obs = result.observation
    assert obs is not None and obs.model_calls == 3
    assert billed > 0 and obs.cost_usd == pytest.approx(billed)
    assert len([c for c in models.ledgers["task"].calls if c.ok]) == 3


def test_control_without_the_wait_calls_in_flight_escape_the_item(tmp_path, monkeypatch):
    monkeypatch.setattr(_proxy, "_JOIN_SERVED", False)
    monkeypatch.setattr(Meter, "wait_calls", lambda self, timeout=None: True)
    with ScriptedServer(default=reply("late", latency_s=1.0)) as server:
        server.bill(**PRICE)
        models = server.models(tmp_path, **PRICE)
        with using(models):
            result = _evaluation(models)({"code": LEAVES_CALLS_BEHIND}, Item("n2", {"n": 2}))
        assert result.observation is not None and result.observation.model_calls < 3


@pytest.mark.slow
def test_calls_left_in_flight_reach_the_driver_from_worker_processes(tmp_path):
    from projects import make_sum_code_project

    from skynet.executors import open_executor
    from skynet.models import configure
    from skynet.project import open_project

    with ScriptedServer(default=reply("late", latency_s=1.0)) as server:
        server.bill(**PRICE)
        folder = make_sum_code_project(
            tmp_path / "p",
            code=LEAVES_CALLS_BEHIND,
            metric="def score(input, output, expected=None):\n    return 1.0\n",
            toml=f"""
            [engine]
            executor = "processes"
            workers = 1

            [models]
            task = "openai/skynet-test"

            [models.prices."openai/skynet-test"]
            input_per_mtok = 1000.0
            output_per_mtok = 2000.0

            [models.endpoints."openai/skynet-test"]
            api_base = "{server.url}"
            """,
        )
        project = open_project(folder)
        models = configure(project.config.models_config(), base_dir=folder)
        art = project.artifact
        evaluation = Evaluation(project.metric, art.task(models, project.config.artifact))
        executor = open_executor(project, models, evaluation, print)
        try:
            result, calls = executor.evaluate(dict(art.components), project.dataset.val[0])
        finally:
            executor.close()
        billed = server.billed_usd
    obs = result.observation
    assert obs is not None and obs.model_calls == 3
    assert billed > 0 and obs.cost_usd == pytest.approx(billed)
    paid = [c for c in calls if c.role == "task" and c.ok]
    assert len(paid) == 3 and sum(c.cost_usd or 0 for c in paid) == pytest.approx(billed)


# -- max_tokens -----------------------------------------------------------------------------
HUGE = """
from skynet_sandbox import complete

def run(input):
    # The most the proxy's validation lets through: at $2,000/Mtok, a $4.3M worst case.
    return {"answer": complete("q", max_tokens=2**31 - 1)}
"""


def test_a_candidates_max_tokens_is_capped_and_the_run_goes_on(tmp_path):
    with ScriptedServer(default=reply("a")) as server:
        models = server.models(tmp_path, max_cost_usd=1.0, **PRICE)
        with using(models), metering("i"):
            got = CodeArtifact(source=HUGE, max_tokens=64).run({"code": HUGE}, {})
        assert got == {"answer": "a"}
        assert server.requests[0]["max_tokens"] == 64


def test_control_uncapped_the_budget_refuses_the_run(tmp_path, monkeypatch):
    with ScriptedServer(default=reply("a")) as server:
        models = server.models(tmp_path, max_cost_usd=1.0, **PRICE)
        with using(models), metering("i"), pytest.raises(BudgetExhausted):
            CodeArtifact(source=HUGE, max_tokens=2**31).run({"code": HUGE}, {})
        assert server.request_count == 0
