"""engines/async_gepa.py (issue 30): a proposal's val evaluation runs beside the next proposal,
the same run for the same seed whatever order the replies arrive in, the budget never
exceeded, gepa's options it does not run refused by name."""

from __future__ import annotations

import dataclasses
import random
import re
import threading
import time

import pytest

from engines.async_gepa import AsyncGepaEngine
from engines.gepa import GepaEngine
from skynet.data import Item
from skynet.engine import EngineSettings
from skynet.errors import ConfigError, StorageError
from skynet.testing import engine_context

REGIONS = 6
ITEMS = [Item(id=f"i{n:02d}", input={"n": n}, expected={"region": n % REGIONS}) for n in range(30)]
_KNOWN = re.compile(r"Known: ([\d ]*)\.")


def known(text: str) -> set[int]:
    found = _KNOWN.search(text)
    return {int(x) for x in found.group(1).split()} if found else set()


class Task:
    """Right on an item when the instructions list its region; the reflection adds the regions
    its feedback names. Each call sleeps a random while (seeded by the call, not the order)."""

    def __init__(self, jitter: int) -> None:
        self.jitter = jitter
        self.lock = threading.Lock()
        self.now = self.peak = 0
        self.spans: list[tuple[str, float, float]] = []  # ("val" | "reflection", start, end)

    def _wait(self, key: str) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(random.Random(f"{self.jitter}:{key}").uniform(0.001, 0.02))
        with self.lock:
            self.now -= 1

    def score(self, candidate, item):
        start = time.perf_counter()
        self._wait(candidate["instructions"] + item.id)
        if int(item.id[1:]) >= 18:  # a val item
            self.spans.append(("val", start, time.perf_counter()))
        region = item.expected["region"]
        if region in known(candidate["instructions"]):
            return 1.0, "right"
        return 0.0, f"wrong: region {region} is missing"

    def reflect(self, prompt, draw, max_tokens):
        start = time.perf_counter()
        self._wait(prompt)
        self.spans.append(("reflection", start, time.perf_counter()))
        regions = known(prompt.split("```")[1]) | {
            int(r) for r in re.findall(r"region (\d)", prompt)
        }
        listed = " ".join(str(r) for r in sorted(regions))
        return f"```\nAnswer by region. Known: {listed}.\n```"


def _context(task: Task, budget: int | None, concurrency: int, **options):
    """The task's search context: 18 train and 12 val items, minibatch 3, seed 0."""
    return engine_context(
        {"instructions": "Answer by region. Known: ."},
        train=ITEMS[:18],
        val=ITEMS[18:],
        score=task.score,
        reflect=task.reflect,
        max_metric_calls=budget,
        settings=EngineSettings(
            concurrency=concurrency, options={"frontier_type": "instance", **options}
        ),
        minibatch_size=3,
        seed=0,
    )


def _run(jitter: int, budget: int = 200, concurrency: int = 9, engine=AsyncGepaEngine, **options):
    task = Task(jitter)
    ctx = _context(task, budget, concurrency, **options)
    return engine().optimize(ctx), ctx.recorded, task


@pytest.mark.parametrize("width", [1, 3])
def test_the_same_seed_gives_the_same_run_whatever_order_replies_arrive_in(width):
    sampling = f"independent:{width}"
    first, recorded, _ = _run(jitter=1, sampling_strategy=sampling)
    second, _, _ = _run(jitter=2, sampling_strategy=sampling)  # other arrival orders
    assert first.candidates == second.candidates and first.parents == second.parents
    assert first.val_scores == second.val_scores
    assert max(first.val_scores) > first.val_scores[0]  # it learned
    # ... every region, and then it stops, budget left (gepa's stop, engines/stops.py).
    assert first.stopped_by.startswith("the best is perfect on val") and first.metric_calls < 200
    statuses = [p["status"] for p in recorded.proposals]
    assert "accepted" in statuses


def test_the_budget_is_never_exceeded_and_the_slots_are_busy():
    for width in (1, 3):
        outcome, recorded, task = _run(
            jitter=3, budget=60, sampling_strategy=f"independent:{width}"
        )
        assert recorded.metric_calls <= 60 and outcome.metric_calls == recorded.metric_calls
        # A val evaluation of 12 items side by side, and the next proposal's work beside it.
        assert task.peak > 3
    # The least budget it proposes with (min_metric_calls: the seed and the child on val, a
    # parent and its child on a minibatch): one proposal, its child not scored ahead.
    engine = AsyncGepaEngine()
    least = engine.min_metric_calls(train=18, val=12, minibatch_size=3)
    outcome, recorded, _ = _run(jitter=3, budget=least)
    assert least == 30 and recorded.metric_calls <= least
    assert len(outcome.candidates) == 2
    assert [p["status"] for p in recorded.proposals] == ["proposed", "accepted"]


def _overlaps(task: Task) -> int:
    """Reflection calls made while a val evaluation was in flight."""
    vals = [(a, b) for kind, a, b in task.spans if kind == "val"]
    return sum(
        any(a < end and start < b for a, b in vals)
        for kind, start, end in task.spans
        if kind == "reflection"
    )


def test_the_next_reflection_is_written_while_the_last_child_is_scored_on_val():
    # gepa's loop waits for a child's val evaluation before its next proposal; here the next
    # proposal, drawn from that child, goes straight to its reflection (its parent minibatch
    # was scored with the child's own) while the val items run beside it.
    outcome, _, task = _run(jitter=4, engine=AsyncGepaEngine)
    assert len(outcome.candidates) >= 3 and _overlaps(task) >= 1
    _, _, sync = _run(jitter=4, engine=GepaEngine)
    assert _overlaps(sync) == 0


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"max_merge_invocations": 2},
            "[engine.options] max_merge_invocations: engine 'gepa-async' takes",
        ),
        (
            {"sampling_strategy": "pxn:2,2"},
            "sampling_strategy = 'pxn:2,2': engine 'gepa-async' runs",
        ),
        (
            {"selection_strategy": "all"},
            "selection_strategy = 'all': engine 'gepa-async' runs \"best\"",
        ),
    ],
)
def test_a_gepa_option_it_does_not_run_is_refused_by_name(options, said):
    with pytest.raises(ConfigError) as raised:
        AsyncGepaEngine().choices(EngineSettings(options=options))
    assert said in str(raised.value) and "use engine 'gepa'" in str(raised.value)


def test_a_run_on_the_async_search_is_recorded_and_reported_like_gepas(
    tmp_path, scripted_server, capsys
):
    from projects import BETTER, make_project, task_responder

    from skynet.cli import main
    from skynet.runs.store import RunStore, runs_db_path

    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=6)
    assert main(["-C", str(project), "run", "--engine", "gepa-async"]) == 0
    out = capsys.readouterr()
    assert "engine 'gepa-async' named in the config" in out.err
    assert "+1.000" in out.out  # the rewrite won on test, as under gepa
    with RunStore(runs_db_path(project), readonly=True) as store:
        run = store.latest_run()
        assert run is not None and run.status == "finished"
        statuses = {p.status for p in store.proposals(run.id)}
        best = [c for c in store.candidates(run.id) if c.id == run.best_candidate_id][0]
        assert best.parents == [run.seed_candidate_id]
        calls = len(store.evaluations(run.id, split="val")) + len(
            store.evaluations(run.id, split="train")
        )
    assert "accepted" in statuses
    assert BETTER in best.content["instructions"]
    assert calls <= 40


def test_a_run_level_fault_stops_the_search_without_starting_queued_calls():
    # A fault that is not one item's (the store's disk full, an abort) ends the search: the
    # val items and minibatches not yet begun are cancelled, not run after it.
    calls = 0
    lock = threading.Lock()
    ctx = _context(Task(jitter=5), budget=None, concurrency=2)
    evaluate = ctx.evaluate

    def failing(candidate, item):
        nonlocal calls
        with lock:
            calls += 1
            if calls == 2:
                raise StorageError("the disk is full")
        time.sleep(0.05)
        return evaluate(candidate, item)

    with pytest.raises(StorageError):
        AsyncGepaEngine().optimize(dataclasses.replace(ctx, evaluate=failing))
    # The second call failed (the first proposal's minibatch, queued ahead of the seed's 12 val
    # items): at most the other slot's call was under way with it, and the val items never ran.
    assert calls <= 4


def test_a_budget_too_small_to_score_a_child_on_val_is_refused_before_any_call(tmp_path, capsys):
    from projects import make_project

    from skynet.cli import main

    project = make_project(tmp_path / "p", "http://127.0.0.1:9/v1", budget=20)  # no server
    assert main(["-C", str(project), "run", "--engine", "gepa-async"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "skynet: error: budget.max_metric_calls = 20 is too small: the gepa-async engine needs "
        "at least 22 (8 val items for the seed, then a reflection step on 3 train items, twice, "
        "then the child on the 8 val items) to propose once; use --max-metric-calls 22 or more"
    ]
