"""The run report computed from known rows in a real run store."""

from __future__ import annotations

from pathlib import Path

import pytest

from skynet import Observation, Result
from skynet.models.ledger import CallRecord
from skynet.runs import RunStore, render_html, render_text, runs_db_path, summarize

SCRIPT = "<script>alert('x')</script>"
SEED_PROMPT = "Classify the ticket.\nAnswer with one label.\n"
BEST_PROMPT = f"Classify the ticket.\nAnswer with one label, lower case.\n{SCRIPT}\n"


def _eval(store: RunStore, run_id: str, cand: str, split: str, item: str, score, **kw) -> None:
    result = (
        Result(item_id=item, error="metric.py raised KeyError('label')", error_kind="metric")
        if score is None
        else Result(
            item_id=item,
            output=f"out-{item}",
            score=score,
            feedback="ok" if score else "wrong label",
            scores={"accuracy": score, "brevity": 0.5},
            observation=Observation(elapsed_ms=10.0),
        )
    )
    store.record_evaluation(run_id, cand, split, result, kw.get("metric_hash", "m1"))


@pytest.fixture
def store(tmp_path: Path):
    s = RunStore(runs_db_path(tmp_path))
    yield s
    s.close()


def make_run(store: RunStore, *, name_best: bool = True) -> str:
    """A run with known rows: seed c0 (val 0.5), c1 only partly on val, c2 best (val 2/3)."""
    run_id = store.create_run(
        config={},
        dataset_hash="d" * 64,
        metric_hash="m1",
        seed=0,
        engine="gepa",
        budget={"max_metric_calls": 20},
        versions={},
    )
    store.add_candidate(run_id, "c0", {"prompt": SEED_PROMPT})
    store.set_seed_candidate(run_id, "c0")
    for item, score in [("v1", 1.0), ("v2", 0.0), ("v3", 0.0), ("v4", 1.0)]:  # seq 1-4
        _eval(store, run_id, "c0", "val", item, score)
    store.add_candidate(run_id, "c1", {"prompt": "Classify.\n"}, parents=["c0"])
    for item in ["t1", "t2"]:  # seq 5-6: a train minibatch
        _eval(store, run_id, "c1", "train", item, 1.0)
    for item in ["v1", "v2", "v3"]:  # seq 7-9: 3 of 4 val items, all right, but not a val score
        _eval(store, run_id, "c1", "val", item, 1.0)
    store.add_candidate(run_id, "c2", {"prompt": BEST_PROMPT}, parents=["c0"])
    for item in ["t1", "t2"]:  # seq 10-11
        _eval(store, run_id, "c2", "train", item, 1.0)
    for item, score in [("v1", 1.0), ("v2", 1.0), ("v3", 0.0), ("v4", None)]:  # seq 12-15
        _eval(store, run_id, "c2", "val", item, score)
    if name_best:
        store.set_best(run_id, "c2")
    # `skynet eval` afterwards: test evaluations are not the optimization's metric calls.
    for cand, item, score in [("c0", "x1", 0.0), ("c0", "x2", 1.0), ("c2", "x1", 1.0), ("c2", "x2", 1.0)]:  # fmt: skip
        _eval(store, run_id, cand, "test", item, score)
    # Scored under an older metric only: stale.
    _eval(store, run_id, "c1", "val", "v4", 1.0, metric_hash="m0")

    for cost, cached in [(0.01, False), (0.01, False), (0.01, True)]:
        store.record_call(
            run_id,
            CallRecord(role="task", model="openai/a", elapsed_ms=200, cost_usd=cost, cached=cached),
        )
    store.record_call(
        run_id, CallRecord(role="reflection", model="x/unpriced", elapsed_ms=3000, cost_usd=None)
    )
    store.record_proposal(run_id, parent_id="c0", status="accepted", detail="new")
    store.record_proposal(run_id, parent_id="c0", status="accepted", detail="new")
    store.record_proposal(run_id, parent_id="c1", status="rejected", detail="0.4 < 0.5")
    store.set_status(run_id, "finished")
    return run_id


def test_baseline_and_best_scores(store: RunStore):
    s = summarize(store, make_run(store))
    assert s.seed is not None and s.best is not None
    assert (s.seed.id, s.best.id) == ("c0", "c2")
    assert s.val_items == 4 and s.test_items == 2
    assert s.seed.val_score == pytest.approx(0.5) and s.seed.val_errors == 0
    # The error on v4 is neither a 0 nor left uncounted: mean over the 3 scores, 1 error.
    assert s.best.val_score == pytest.approx(2 / 3) and s.best.val_errors == 1
    assert s.seed.test_score == pytest.approx(0.5) and s.best.test_score == pytest.approx(1.0)
    assert s.seed.objectives == pytest.approx({"accuracy": 0.5, "brevity": 0.5})
    assert s.best.objectives == pytest.approx({"accuracy": 2 / 3, "brevity": 0.5})


def test_a_partial_minibatch_is_not_a_val_score(store: RunStore):
    s = summarize(store, make_run(store, name_best=False))
    c1 = next(c for c in s.candidates if c.id == "c1")
    assert c1.val_score is None and c1.val_items == 3 and c1.parents == ["c0"]
    # Unnamed by the engine, the best is the highest complete val score: c2, not c1's 3 of 4.
    assert s.best is not None and s.best.id == "c2"


def test_counts_cost_and_curve(store: RunStore):
    s = summarize(store, make_run(store))
    assert s.metric_calls == 15  # train and val; the 4 test evaluations are not counted
    assert s.errors == 1 and s.error_kinds == {"metric": 1}
    assert s.proposals == {"accepted": 2, "rejected": 1}
    assert s.stale == 1
    task, reflection = s.cost["task"], s.cost["reflection"]
    assert (task.calls, task.cached_calls) == (3, 1)
    assert task.cost_usd == pytest.approx(0.02)
    assert task.elapsed_ms == pytest.approx(600)
    assert reflection.unpriced_calls == 1 and s.cost["metric"].calls == 0
    # c0's val score is known at call 4, c2's at call 15; c1 never gets one.
    assert s.curve == [(4, pytest.approx(0.5)), (15, pytest.approx(2 / 3))]


def test_curve_keeps_the_best_so_far(store: RunStore):
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m1", seed=0, engine="gepa", budget={}, versions={}
    )
    for cand, scores in [("a", [1.0, 1.0]), ("b", [0.0, 0.0]), ("c", [1.0, 0.0])]:
        store.add_candidate(run_id, cand, {"p": cand})
        for i, score in enumerate(scores):
            _eval(store, run_id, cand, "val", f"v{i}", score)
    s = summarize(store, run_id)
    assert s.curve == [(2, 1.0), (4, 1.0), (6, 1.0)]
    assert s.best is not None and s.best.id == "a"  # a tie goes to the earliest
    assert s.diff == {}


def test_diff_of_best_against_seed(store: RunStore):
    s = summarize(store, make_run(store))
    assert list(s.diff) == ["prompt"]
    diff = s.diff["prompt"]
    assert "--- seed/prompt" in diff and "+++ best/prompt" in diff
    assert "-Answer with one label.\n" in diff
    assert "+Answer with one label, lower case.\n" in diff
    assert f"+{SCRIPT}\n" in diff


def test_text_report(store: RunStore):
    text = render_text(summarize(store, make_run(store)))
    baseline = next(line for line in text.splitlines() if line.strip().startswith("baseline"))
    best = next(line for line in text.splitlines() if line.strip().startswith("best "))
    assert "c0" in baseline and "0.500" in baseline
    assert "c2" in best and "0.667 (1 error)" in best and "1.000" in best
    assert "+0.167" in text
    assert "Metric calls used: 15 of 20" in text
    assert "$0.0200" in text and "unpriced" in text
    assert "accepted 2, rejected 1" in text
    assert "+Answer with one label, lower case." in text
    assert "\x1b[" not in text


def test_html_report_is_self_contained_and_escaped(store: RunStore):
    page = render_html(summarize(store, make_run(store)))
    assert page.startswith("<!DOCTYPE html>")
    assert "<svg" in page and "</svg>" in page and "<polyline" in page
    assert "metric calls used" in page and "best val score" in page
    assert SCRIPT not in page and "&lt;script&gt;" in page
    assert "<script" not in page.lower()
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in page
    # The candidates table lists each with its parents and scores.
    assert '<td class="mono">c1</td><td>c0</td><td>- (3 of 4 items)</td>' in page


def test_an_empty_run_renders(store: RunStore):
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m1", seed=0, engine="auto", budget={}, versions={}
    )
    s = summarize(store, run_id)
    assert (s.seed, s.best, s.curve, s.metric_calls) == (None, None, [], 0)
    assert "no val score recorded yet" in render_html(s)
    assert f"Run {run_id}  running" in render_text(s)
