"""The run store against a real SQLite file: round trips, idempotence, migrations, durability."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from skynet import ConfigError, Observation, Result
from skynet.models.ledger import ROLES, CallRecord, Ledger
from skynet.runs import MIGRATIONS, RunStore, runs_db_path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def store(tmp_path: Path):
    s = RunStore(runs_db_path(tmp_path))
    yield s
    s.close()


def new_run(store: RunStore, **overrides) -> str:
    fields = dict(
        config={"engine": {"name": "gepa"}, "data": {"path": "data.jsonl"}},
        dataset_hash="d" * 64,
        metric_hash="m1",
        seed=7,
        engine="gepa",
        budget={"max_metric_calls": 150},
        versions={"skynet": "0.1.0.dev0", "gepa": "0.1.4"},
    )
    fields.update(overrides)
    return store.create_run(**fields)


OBS = Observation(
    elapsed_ms=12.5,
    model_calls=2,
    input_tokens=30,
    output_tokens=4,
    cost_usd=None,
    cost_note="cost not measurable: no known price for x",
    time_note="1 of 2 model call(s) served from the cache",
    cache_hit=True,
)


def test_store_lives_in_dot_skynet_beside_the_config(tmp_path: Path):
    assert runs_db_path(tmp_path) == tmp_path / ".skynet" / "runs.db"
    RunStore(runs_db_path(tmp_path)).close()
    assert (tmp_path / ".skynet" / "runs.db").is_file()


def test_run_round_trip(store: RunStore):
    run_id = new_run(store)
    assert re.fullmatch(r"\d{8}-\d{6}-[0-9a-f]{4}", run_id)
    run = store.get_run(run_id)
    assert run.status == "running" and run.finished is None
    assert run.config == {"engine": {"name": "gepa"}, "data": {"path": "data.jsonl"}}
    assert (run.dataset_hash, run.metric_hash, run.seed, run.engine) == ("d" * 64, "m1", 7, "gepa")
    assert run.budget == {"max_metric_calls": 150}
    assert run.versions["gepa"] == "0.1.4"
    assert run.notes == {}

    store.set_seed_candidate(run_id, "c0")
    store.set_best(run_id, "c1")
    store.set_note(run_id, "engine_choice", {"chose": "gepa", "why": "prompt artifact"})
    store.set_note(run_id, "minibatch", 3)
    store.set_status(run_id, "failed", error="too many metric errors (12 of 20)")
    run = store.get_run(run_id)
    assert (run.seed_candidate_id, run.best_candidate_id) == ("c0", "c1")
    assert run.notes == {
        "engine_choice": {"chose": "gepa", "why": "prompt artifact"},
        "minibatch": 3,
    }
    assert run.status == "failed" and run.error == "too many metric errors (12 of 20)"
    assert run.finished is not None

    store.set_status(run_id, "running")  # resumed
    run = store.get_run(run_id)
    assert (run.status, run.error, run.finished) == ("running", None, None)


def test_runs_are_listed_newest_first(store: RunStore):
    assert store.latest_run() is None and store.list_runs() == []
    ids = [new_run(store, seed=i) for i in range(3)]
    assert [r.id for r in store.list_runs()] == ids[::-1]
    latest = store.latest_run()
    assert latest is not None and latest.id == ids[-1]
    assert len(set(ids)) == 3


def test_unknown_run_lists_the_recent_ids(store: RunStore):
    with pytest.raises(ConfigError, match="no runs yet"):
        store.get_run("nope")
    ids = [new_run(store) for _ in range(2)]
    with pytest.raises(ConfigError) as err:
        store.get_run("nope")
    assert all(i in str(err.value) for i in ids) and "runs.db" in str(err.value)
    with pytest.raises(ConfigError, match="nope"):
        store.set_best("nope", "c0")
    with pytest.raises(ConfigError, match="nope"):
        store.record_evaluation("nope", "c0", "val", Result(item_id="a", score=1.0), "m1")


def test_bad_status_is_refused(store: RunStore):
    run_id = new_run(store)
    with pytest.raises(ValueError, match="finished"):
        store.set_status(run_id, "done")


def test_candidates_are_idempotent_and_keep_first_seen_order(store: RunStore):
    run_id = new_run(store)
    store.add_candidate(run_id, "c0", {"prompt": "Answer."})
    store.add_candidate(run_id, "c1", {"prompt": "Answer briefly."})
    store.add_candidate(run_id, "c0", {"prompt": "Answer."})
    store.add_candidate(run_id, "c1", {"prompt": "Answer briefly."}, parents=["c0"])
    store.add_candidate(run_id, "c2", {"prompt": "x", "system": "y"}, parents=["c1", "c0"])
    rows = store.candidates(run_id)
    assert [(c.id, c.seq, c.parents) for c in rows] == [
        ("c0", 1, []),
        ("c1", 2, ["c0"]),
        ("c2", 3, ["c1", "c0"]),
    ]
    assert rows[2].content == {"prompt": "x", "system": "y"}
    assert store.candidates(new_run(store)) == []


RESULTS = [
    Result(
        item_id="ok",
        output={"answer": "Paris", "calls": [1, 2]},
        score=0.75,
        feedback="close; name the country too",
        scores={"accuracy": 1.0, "speed": 0.5},
        extra={"judge": "yes"},
        observation=OBS,
        notes=("feedback cut to 4000 characters",),
    ),
    Result(
        item_id="task-error",
        observation=Observation(elapsed_ms=3.0),
        error="the artifact failed on item 'task-error': RuntimeError('boom')",
        error_kind="task",
        traceback="Traceback (most recent call last):\n  ...\nRuntimeError: boom\n",
    ),
    Result(
        item_id="metric-error",
        output="text",
        observation=OBS,
        error="metric.py raised ZeroDivisionError",
        error_kind="metric",
        traceback="tb",
    ),
    Result(item_id="no-observation", output=None, score=0.0, feedback=""),
]


@pytest.mark.parametrize("result", RESULTS, ids=lambda r: r.item_id)
def test_find_evaluation_rebuilds_an_equal_result(store: RunStore, result: Result):
    run_id = new_run(store)
    store.record_evaluation(run_id, "c0", "val", result, "m1")
    found = store.find_evaluation(run_id, "c0", result.item_id, "m1")
    assert found == result
    assert store.find_evaluation(run_id, "c0", result.item_id, "m2") is None
    assert store.find_evaluation(run_id, "c1", result.item_id, "m1") is None


def test_an_error_is_stored_without_a_score(store: RunStore):
    run_id = new_run(store)
    store.record_evaluation(
        run_id, "c0", "val", Result(item_id="a", score=1.0, error="x", error_kind="metric"), "m1"
    )
    (row,) = store.evaluations(run_id)
    assert row.score is None and row.error == "x" and row.error_kind == "metric"


def test_a_lone_surrogate_in_feedback_or_an_error_is_kept_escaped(store: RunStore):
    """A model reply quoted in feedback can hold a lone surrogate, which SQLite's UTF-8 cannot:
    the row is written, with the surrogate as its escape, instead of the evaluation being lost."""
    run_id = new_run(store)
    result = Result(item_id="a", output="\ud800", score=0.0, feedback="got '\ud800'")
    store.record_evaluation(run_id, "c0", "val", result, "m1")
    failed = Result(item_id="b", error="bad \udfff", error_kind="metric", traceback="\ud800")
    store.record_evaluation(run_id, "c0", "val", failed, "m1")
    store.record_proposal(run_id, parent_id=None, status="proposed", detail="\ud800", text="\ud800")
    store.set_status(run_id, "failed", error="\ud800")
    rows = {row.item_id: row for row in store.evaluations(run_id)}
    assert rows["a"].feedback == "got '\\ud800'"
    assert rows["a"].output == "\ud800"  # JSON keeps it exactly
    assert rows["b"].error == "bad \\udfff"
    assert store.get_run(run_id).error == "\\ud800"


def test_non_json_output_is_kept_as_its_repr(store: RunStore):
    run_id = new_run(store)

    class Answer:
        def __repr__(self) -> str:
            return "Answer(text='Paris')"

    store.record_evaluation(run_id, "c0", "val", Result(item_id="a", output=Answer()), "m1")
    (row,) = store.evaluations(run_id)
    assert row.output == "Answer(text='Paris')" and row.output_is_repr
    store.record_evaluation(run_id, "c0", "val", Result(item_id="b", output=[1, "x"]), "m1")
    assert store.evaluations(run_id)[1].output_is_repr is False


def test_recording_the_same_evaluation_again_is_a_no_op(store: RunStore):
    run_id = new_run(store)
    first = Result(item_id="a", output="x", score=1.0, observation=OBS)
    store.record_evaluation(run_id, "c0", "val", first, "m1")
    store.record_evaluation(run_id, "c0", "val", Result(item_id="a", score=0.0), "m1")
    assert [(e.item_id, e.score, e.seq) for e in store.evaluations(run_id)] == [("a", 1.0, 1)]
    # Another metric scoring the same output is another record (the old one is then stale).
    store.record_evaluation(run_id, "c0", "val", Result(item_id="a", score=0.5), "m2")
    assert [(e.metric_hash, e.score, e.seq) for e in store.evaluations(run_id)] == [
        ("m1", 1.0, 1),
        ("m2", 0.5, 2),
    ]


def test_evaluations_filter_by_candidate_and_split(store: RunStore):
    run_id = new_run(store)
    for cand, split, item in [("c0", "val", "v1"), ("c0", "train", "t1"), ("c1", "val", "v1")]:
        store.record_evaluation(run_id, cand, split, Result(item_id=item, score=1.0), "m1")
    other = new_run(store)
    store.record_evaluation(other, "c0", "val", Result(item_id="v1", score=0.0), "m1")

    assert [(e.candidate_id, e.item_id, e.seq) for e in store.evaluations(run_id)] == [
        ("c0", "v1", 1),
        ("c0", "t1", 2),
        ("c1", "v1", 3),
    ]
    assert [e.item_id for e in store.evaluations(run_id, candidate_id="c0")] == ["v1", "t1"]
    assert [e.candidate_id for e in store.evaluations(run_id, split="val")] == ["c0", "c1"]
    assert len(store.evaluations(run_id, candidate_id="c0", split="train")) == 1
    assert [e.seq for e in store.evaluations(other)] == [1]


CALLS = [
    CallRecord(role="task", model="openai/a", elapsed_ms=100, input_tokens=10, output_tokens=2, cost_usd=0.01),
    CallRecord(role="task", model="openai/a", elapsed_ms=1, input_tokens=10, output_tokens=2, cost_usd=0.01, cached=True),
    CallRecord(role="task", model="openai/a", elapsed_ms=50, ok=False, error="timeout", attempts=3),
    CallRecord(role="reflection", model="x/unpriced", elapsed_ms=900, input_tokens=500, output_tokens=80, item_id=None),
    CallRecord(role="metric", model="openai/b", elapsed_ms=20, input_tokens=40, output_tokens=1, cost_usd=0.002, item_id="v1"),
]  # fmt: skip


def test_calls_round_trip_and_sum_like_a_ledger(store: RunStore):
    run_id = new_run(store)
    for call in CALLS:
        store.record_call(run_id, call)
    assert store.calls(run_id) == CALLS

    totals = store.cost_by_role(run_id)
    assert set(totals) == set(ROLES)
    for role in ROLES:
        ledger = Ledger(role)
        for call in CALLS:
            if call.role == role:
                ledger.add(call)
        assert totals[role] == ledger.totals()
    task = totals["task"]
    assert (task.calls, task.failed_calls, task.cached_calls) == (3, 1, 1)
    assert task.cost_usd == pytest.approx(0.01)  # the cached call is not paid again
    assert totals["reflection"].unpriced_calls == 1 and totals["reflection"].cost_usd == 0


def test_cost_by_role_has_every_role_on_an_empty_run(store: RunStore):
    totals = store.cost_by_role(new_run(store))
    assert set(totals) == set(ROLES) and all(t.calls == 0 for t in totals.values())


def test_proposals_round_trip(store: RunStore):
    run_id = new_run(store)
    store.record_proposal(run_id, parent_id="c0", status="accepted", detail="0.6 > 0.5", text="new")
    store.record_proposal(run_id, parent_id=None, status="empty", detail="model returned nothing")
    rows = store.proposals(run_id)
    assert [(p.seq, p.parent_id, p.status, p.detail, p.text) for p in rows] == [
        (1, "c0", "accepted", "0.6 > 0.5", "new"),
        (2, None, "empty", "model returned nothing", ""),
    ]


def test_concurrent_writers_in_threads_lose_nothing(store: RunStore):
    run_id = new_run(store)

    def write(worker: int) -> None:
        for i in range(25):
            item = f"w{worker}-{i}"
            store.record_evaluation(run_id, "c0", "val", Result(item_id=item, score=1.0), "m1")
            store.record_call(run_id, CallRecord(role="task", model="m", elapsed_ms=1.0))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = store.evaluations(run_id)
    assert len(rows) == 200
    assert sorted(r.seq for r in rows) == list(range(1, 201))
    assert store.cost_by_role(run_id)["task"].calls == 200


def test_migrations_are_recorded_once(tmp_path: Path):
    path = runs_db_path(tmp_path)
    with RunStore(path) as first:
        applied = first.migrations()
    assert [name for name, _ in applied] == [m.__name__ for m in MIGRATIONS]
    assert applied[0][0] == "m001_initial"
    with RunStore(path) as again:
        assert again.migrations() == applied  # same rows, same times: nothing re-applied


def test_a_db_from_a_newer_skynet_is_refused(tmp_path: Path):
    path = runs_db_path(tmp_path)
    RunStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO skynet_migrations (name, applied) VALUES ('m999_future', '2099-01-01')"
        )
    db.close()
    with pytest.raises(ConfigError, match=r"newer Skynet.*m999_future.*upgrade"):
        RunStore(path)


def test_a_file_that_is_not_a_run_store_is_refused(tmp_path: Path):
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(ConfigError, match="not a Skynet run store"):
        RunStore(path)


def test_wal_mode_is_on(store: RunStore):
    new_run(store)
    db = sqlite3.connect(store.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


WRITER = """
import sys
from skynet import Result
from skynet.models.ledger import CallRecord
from skynet.runs import RunStore

store = RunStore(sys.argv[1])
run_id = sys.argv[2]
i = 0
while True:
    i += 1
    store.record_evaluation(run_id, "c0", "val", Result(item_id=f"i{i}", score=1.0), "m1")
    store.record_call(run_id, CallRecord(role="task", model="m", elapsed_ms=1.0))
    print(i, flush=True)  # printed only once both writes returned
"""


def test_a_killed_writer_loses_nothing_it_recorded(tmp_path: Path):
    path = runs_db_path(tmp_path)
    with RunStore(path) as store:
        run_id = new_run(store)
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    done = 0
    try:
        for line in child.stdout:
            done = int(line)
            if done >= 30:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL, child.stderr.read() if child.stderr else ""
    assert done >= 30

    with RunStore(path) as store:
        recorded = store.evaluations(run_id)
        assert len(recorded) >= done  # the child may have committed more before it died
        assert {f"i{i}" for i in range(1, done + 1)} <= {e.item_id for e in recorded}
        assert store.cost_by_role(run_id)["task"].calls >= done


# The v1 fixture was written once by this code (m001_initial) and is kept as it is, so runs
# recorded by this version keep loading after later migrations.
V1_RUN = "20260101-120000-0a1b"


def test_the_v1_fixture_still_loads(tmp_path: Path):
    path = tmp_path / "runs.db"
    shutil.copy(FIXTURES / "runs_v1.db", path)  # opening migrates: never touch the fixture
    with RunStore(path) as store:
        assert [name for name, _ in store.migrations()][0] == "m001_initial"
        run = store.get_run(V1_RUN)
        assert (run.status, run.engine, run.seed) == ("finished", "gepa", 0)
        assert (run.seed_candidate_id, run.best_candidate_id) == ("c0", "c1")
        assert run.notes == {"engine_choice": "gepa"}
        assert [(c.id, c.parents) for c in store.candidates(V1_RUN)] == [("c0", []), ("c1", ["c0"])]
        found = store.find_evaluation(V1_RUN, "c1", "v1", "m1")
        assert found is not None and found.score == 1.0 and found.feedback == "right"
        assert found.observation == Observation(elapsed_ms=5.0, model_calls=1, cost_usd=0.001)
        assert len(store.evaluations(V1_RUN)) == 4
        assert store.cost_by_role(V1_RUN)["task"].calls == 4
        assert [p.status for p in store.proposals(V1_RUN)] == ["accepted"]
        # A store read from the fixture is writable too.
        store.record_evaluation(V1_RUN, "c1", "test", Result(item_id="x1", score=0.5), "m1")
        assert len(store.evaluations(V1_RUN, split="test")) == 1


def test_a_huge_error_traceback_or_feedback_is_stored_cut_with_its_hash(store: RunStore):
    # A candidate makes what it raises: 5 MB of it must not grow runs.db by 5 MB per item.
    from skynet.models.ledger import CALL_TEXT_BYTES

    run_id = new_run(store)
    huge = "x" * (5 << 20)
    store.record_evaluation(
        run_id,
        "c0",
        "val",
        Result(item_id="a", error=huge, error_kind="candidate", traceback=huge),
        "m1",
    )
    store.record_evaluation(
        run_id, "c0", "val", Result(item_id="b", score=0.0, feedback=huge), "m1"
    )
    a = store.find_evaluation(run_id, "c0", "a", "m1")
    b = store.find_evaluation(run_id, "c0", "b", "m1")
    assert a is not None and b is not None
    for text in (a.error, a.traceback, b.feedback):
        assert text is not None and len(text.encode()) < CALL_TEXT_BYTES + 200
        assert text.startswith("x" * 1000) and "…[cut: " in text and "sha256 " in text
    files = [store.path, store.path.with_name(store.path.name + "-wal")]
    assert sum(f.stat().st_size for f in files if f.exists()) < 4 << 20


@pytest.mark.slow
def test_a_resumed_runs_wall_time_leaves_its_pause_out(tmp_path: Path):
    import time

    path = runs_db_path(tmp_path)
    with RunStore(path) as first:
        run_id = new_run(first)
        time.sleep(0.05)
        first.set_status(run_id, "stopped", error="interrupted")
        before = first.get_run(run_id).wall_seconds
    assert before is not None and before >= 0.05
    time.sleep(0.4)  # the pause: in no process's time
    with RunStore(path) as second:
        second.set_status(run_id, "running")
        assert second.get_run(run_id).wall_seconds is None  # while it runs
        time.sleep(0.05)
        second.set_status(run_id, "finished")
        wall = second.get_run(run_id).wall_seconds
    assert wall is not None and before + 0.05 <= wall < before + 0.4


def test_a_run_resumed_after_a_kill_has_no_measured_wall_time(tmp_path: Path):
    path = runs_db_path(tmp_path)
    with RunStore(path) as first:
        run_id = new_run(first)  # its process was killed: nothing set its wall time
    with RunStore(path) as second:
        second.set_status(run_id, "running")
        second.set_status(run_id, "finished")
        assert second.get_run(run_id).wall_seconds is None  # unknown, not the last part only
