"""Warm start (gepa's opt_state): a code candidate whose run() names `opt_state` gets the best
recorded outputs and scores of earlier candidates on its item, as plain JSON in its sandbox;
never the expected answer or the metric's feedback; the same after a resume. A candidate that
does not ask is called as before."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
from projects import SUM_METRIC, make_sum_code_project

from skynet.artifacts.code import CodeArtifact
from skynet.cli import main
from skynet.data import Item
from skynet.evaluation import WarmItem
from skynet.runs.store import RunStore, runs_db_path, stored_output
from skynet.testing import reply
from skynet.warm_start import MAX_OUTPUT_BYTES, BestSoFar, warming

# The seed asks for the warm start and is one short (n(n-1)/2); the candidate reflection proposes
# is right only by starting from the best output so far (adding n to it): its score is the
# warm start's doing. Each reports the state it was handed.
SEED = textwrap.dedent(
    """
    import json

    def run(input, opt_state):
        n = input["n"]
        return {"total": n * (n - 1) // 2, "state": json.dumps(opt_state)}
    """
)
FROM_BEST = textwrap.dedent(
    """
    import json

    def run(input, opt_state):
        best = opt_state["best_example_evals"]
        start = best[0]["output"]["total"] if best else 0
        return {"total": start + input["n"], "state": json.dumps(opt_state)}
    """
)


def _run(source: str, item: Item) -> object:
    with warming(item.best if isinstance(item, WarmItem) else ()):
        return CodeArtifact(source=source).run({"code": source}, item.input)


def test_a_candidate_that_asks_gets_the_warm_start_and_one_that_does_not_runs_as_before():
    best = ({"score": 0.5, "output": {"xs": [1, 2]}},)
    warm = WarmItem("i1", {"n": 3}, {"total": 6}, best=best)
    asks = "def run(input, opt_state):\n    return opt_state\n"
    assert _run(asks, warm) == {"best_example_evals": [{"score": 0.5, "output": {"xs": [1, 2]}}]}
    assert _run(asks, Item("i1", {"n": 3})) == {"best_example_evals": []}  # nothing so far
    keyword = (
        "def run(input, *, opt_state=None):\n    return len(opt_state['best_example_evals'])\n"
    )
    assert _run(keyword, warm) == 1
    # Not asked: called as run(input), even with room for more arguments.
    assert _run("def run(input):\n    return input['n']\n", warm) == 3
    loose = "def run(input, *args, **kwargs):\n    return [list(args), sorted(kwargs)]\n"
    assert _run(loose, warm) == [[], []]


def test_the_warm_start_keeps_the_best_k_scored_outputs_of_earlier_candidates():
    table = BestSoFar(k=2)  # no items given: each id its own
    table.note("i1", "a", 0.2, {"v": "a"})
    table.note("i1", "b", None, {"v": "error"})  # an error: no score, not kept
    table.note("i1", "c", 0.9, {"v": "c"})
    table.note("i1", "d", 0.2, {"v": "d"})  # ties with a, recorded later: after it
    table.note("i1", "e", 1.0, "x" * (MAX_OUTPUT_BYTES + 1))  # too long to carry
    table.note("i1", "c", 0.9, {"v": "c"})  # replayed: counted once
    table.note("i2", "a", 1.0, {"v": "other item"})
    item = table.warm(Item("i1", {"n": 1}, {"total": 1}))
    assert isinstance(item, WarmItem)
    assert item.best == ({"score": 0.9, "output": {"v": "c"}}, {"score": 0.2, "output": {"v": "a"}})
    assert (item.id, item.input, item.expected) == ("i1", {"n": 1}, {"total": 1})
    assert pickle.loads(pickle.dumps(item)) == item  # it travels to a worker whole
    assert table.warm(Item("i3")) == Item("i3")


def test_an_item_and_its_val_copy_share_a_warm_start_and_a_cut_output_is_left_out():
    item, copy = Item("i1", {"n": 1}, {"t": 1}), Item("val:i1", {"n": 1}, {"t": 1})
    other = Item("i2", {"n": 1}, {"t": 2})  # the same input, another answer: its own
    table = BestSoFar([item, copy, other])
    table.note("i1", "a", 0.5, {"by": "a"})
    table.note("val:i1", "b", 0.75, {"by": "b"})
    table.note("i1", "c", 1.0, stored_output({"x": "y" * (300 << 10)}))  # as runs.db cuts it
    warm = table.warm(copy)
    assert isinstance(warm, WarmItem) and warm.id == "val:i1"
    assert warm.best == (
        {"score": 0.75, "output": {"by": "b"}},
        {"score": 0.5, "output": {"by": "a"}},
    )
    assert table.warm(other) == other


def _project(tmp_path, url: str, executor: str = "threads"):
    return make_sum_code_project(
        tmp_path / "p",
        code=SEED,
        metric=SUM_METRIC,
        toml=f"""
        timeout_s = 10
        best_example_evals_k = 3

        [engine]
        name = "gepa"
        executor = "{executor}"
        workers = 2

        [budget]
        max_metric_calls = 24

        [models]
        reflection = "openai/skynet-test"

        [models.endpoints."openai/skynet-test"]
        api_base = "{url}"
        """,
    )


def _evaluations(project) -> list[tuple[str, str, float | None, dict]]:
    """(candidate, item, score, output) in recording order."""
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        return [(e.candidate_id, e.item_id, e.score, e.output) for e in store.evaluations(run.id)]


def _check_states(project) -> int:
    """Each evaluation's state is the best earlier recorded score and output on its item (the
    expected answer and the feedback nowhere in it); returns how many had a non-empty one."""
    rows = _evaluations(project)
    warmed = 0
    for k, (cid, item_id, _, output) in enumerate(rows):
        state = json.loads(output["state"])
        earlier = [(s, o) for c, i, s, o in rows[:k] if i == item_id and c != cid]
        earlier.sort(key=lambda pair: -pair[0])  # stable: ties stay in recording order
        assert state == {
            # [artifact] best_example_evals_k = 3 (gepa's default, 30, would hold them all)
            "best_example_evals": [{"score": s, "output": o} for s, o in earlier[:3]]
        }, (cid, item_id)
        n = int(item_id[1:])
        assert "want" not in output["state"]  # the metric's feedback ("want 6")
        for entry in state["best_example_evals"]:
            assert set(entry) == {"score", "output"}
            if entry["score"] == 0.0:  # a wrong output: the expected total appears nowhere
                assert entry["output"]["total"] != n * (n + 1) // 2
        warmed += bool(earlier)
    return warmed


# "processes": the warm start travels with the item to a worker process.
@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_a_run_hands_each_evaluation_the_best_so_far_on_its_item(
    tmp_path, scripted_server, executor
):
    scripted_server.responder = lambda body: reply(f"```python\n{FROM_BEST}```")
    project = _project(tmp_path, scripted_server.url, executor)
    assert main(["-C", str(project), "run"]) == 0
    rows = _evaluations(project)
    seed = rows[0][0]
    assert all(
        json.loads(o["state"]) == {"best_example_evals": []} for c, _, _, o in rows if c == seed
    )
    # The proposed candidate ran where the seed had (its minibatch, then val): each of its
    # evaluations got the seed's, and is right by starting from it.
    later = [(i, s) for c, i, s, _ in rows if c != seed]
    assert later and all(s == 1.0 for _, s in later), later
    assert _check_states(project) == len(later)
    best = next((project / ".skynet" / "runs").glob("*/best_code.py")).read_text()
    assert best.strip() == FROM_BEST.strip()


@pytest.mark.slow
def test_the_warm_start_after_a_resume_comes_from_the_records(tmp_path, scripted_server):
    # Killed at the first reflection request: the seed's evaluations are recorded, the proposed
    # candidate's are all made after the resume, from the state read back from runs.db.
    project = _project(tmp_path, scripted_server.url)
    process: subprocess.Popen[bytes] | None = None
    lock = threading.Lock()

    def killer(body):
        with lock:
            if process is not None:
                os.kill(process.pid, signal.SIGKILL)  # mid-request: this reply never arrives
        return reply(f"```python\n{FROM_BEST}```")

    scripted_server.responder = killer
    process = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.wait(timeout=120) == -signal.SIGKILL
    before = _evaluations(project)
    assert before and len({c for c, *_ in before}) == 1  # the seed's only
    with RunStore(runs_db_path(project), readonly=True) as store:
        run_id = store.list_runs()[-1].id

    scripted_server.responder = lambda body: reply(f"```python\n{FROM_BEST}```")
    assert main(["-C", str(project), "run", "--resume", run_id]) == 0
    after = _evaluations(project)
    assert after[: len(before)] == before
    resumed = [r for r in after[len(before) :] if r[0] != before[0][0]]
    assert resumed and all(s == 1.0 for _, _, s, _ in resumed)
    assert _check_states(project) >= len(resumed)
