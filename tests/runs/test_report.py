"""The run report computed from known rows in a real run store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from skynet import Observation, Result
from skynet.models.ledger import CallRecord
from skynet.runs import EVALUATION, RunStore, render_html, render_text, runs_db_path, summarize

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
    assert "c2" in best and "0.667 (1 metric error left out)" in best and "1.000" in best
    assert "+0.167" in text
    # The make_run rows hold test evaluations of c0 and c2: counted apart from the search's.
    assert "Metric calls used: search 15 of 20, confirmation 4 (test)" in text
    assert "Gain on held-out test items (best - seed, paired): +0.500" in text
    assert "$0.0200" in text and "unpriced" in text
    assert "accepted 2, rejected 1" in text
    assert "+Answer with one label, lower case." in text
    assert "\x1b[" not in text


@pytest.mark.slow
def test_html_report_is_self_contained_and_escaped(store: RunStore):
    page = render_html(summarize(store, make_run(store)))
    assert page.startswith("<!DOCTYPE html>")
    # The curve is matplotlib's inline SVG, its text kept as text.
    assert "<svg" in page and "</svg>" in page and "<path" in page
    assert "metric calls used" in page and "best val score" in page
    assert SCRIPT not in page and "&lt;script&gt;" in page
    assert "<script" not in page.lower()
    # Nothing is fetched: the only URLs are the SVG namespaces, and the page forbids fetching.
    namespaces = re.sub(r'xmlns(:xlink)?="http://www\.w3\.org/[0-9]+/(svg|xlink)"', "", page)
    assert "http://" not in namespaces and "https://" not in page
    assert "default-src 'none'" in page
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


def _scored_run(store: RunStore, outcomes: dict[str, list], *, engine: str = "gepa") -> str:
    """A run whose candidates have these val outcomes: a number is a score, a string an error
    of that kind. The first candidate is the seed; none is named best."""
    run_id = store.create_run(
        config={}, dataset_hash="d", metric_hash="m1", seed=0, engine=engine, budget={}, versions={}
    )
    for n, (cand, rows) in enumerate(outcomes.items()):
        store.add_candidate(run_id, cand, {"prompt": cand})
        if n == 0 and engine != EVALUATION:
            store.set_seed_candidate(run_id, cand)
        for i, outcome in enumerate(rows):
            result = (
                Result(item_id=f"v{i}", score=outcome, scores={"q": outcome})
                if isinstance(outcome, float)
                else Result(item_id=f"v{i}", error=f"{outcome} failed", error_kind=outcome)
            )
            store.record_evaluation(run_id, cand, "val", result, "m1")
    return run_id


@pytest.mark.parametrize(
    ("rows", "score", "shown"),
    [
        ([1.0, 0.0, 1.0, 1.0], 0.75, "0.750"),
        ([1.0, 1.0, 1.0, "candidate"], 0.75, "0.750 (1 candidate failure as 0)"),
        ([1.0, 1.0, 1.0, "metric"], 1.0, "1.000 (1 metric error left out)"),
        ([1.0, 0.0, "contract", "task"], 0.5, "0.500 (1 contract error left out, 1 task error left out)"),
        ([1.0, "candidate", "metric", "metric"], 0.5, "0.500 (1 candidate failure as 0, 2 metric errors left out)"),
        (["candidate"] * 4, 0.0, "0.000 (4 candidate failures as 0)"),
        (["metric"] * 4, None, "- (4 metric errors left out)"),
    ],
)  # fmt: skip
def test_the_report_counts_a_candidate_failure_as_0_and_leaves_faults_out(
    store: RunStore, rows, score, shown
):
    run_id = _scored_run(store, {"seed": rows})
    s = summarize(store, run_id)
    assert s.seed is not None
    assert s.seed.val_score == (None if score is None else pytest.approx(score))
    baseline = next(
        line for line in render_text(s).splitlines() if line.strip().startswith("baseline")
    )
    val_cell = baseline.split(None, 2)[2].rstrip().removesuffix("-").strip()  # then test: -
    assert val_cell == shown
    if score is not None and score > 0:
        # The named scores follow the same rule: a failure of the candidate is 0 there too.
        assert s.seed.objectives["q"] == pytest.approx(score)


def test_a_candidate_that_crashes_on_the_hard_items_is_not_the_best(store: RunStore):
    # Both answer the 6 easy items. The honest one gets 1 of the 2 hard items right; the other
    # crashes on both. Left out, the crashes would make it 1.000 and the best.
    honest = [1.0] * 6 + [1.0, 0.0]
    crasher = [1.0] * 6 + ["candidate", "candidate"]
    s = summarize(store, _scored_run(store, {"honest": honest, "crasher": crasher}))
    scores = {c.id: c.val_score for c in s.candidates}
    assert scores == {"honest": pytest.approx(7 / 8), "crasher": pytest.approx(6 / 8)}
    assert s.best is not None and s.best.id == "honest"
    assert s.curve == [(8, pytest.approx(7 / 8)), (16, pytest.approx(7 / 8))]


ATTACK = "\x1b[2J\x1b[31mPWNED\r"


def test_candidate_text_and_errors_are_escaped_in_the_text_report(store: RunStore):
    run_id = make_run(store)
    store.add_candidate(run_id, "c9", {"prompt": f"Classify.\n{ATTACK}\n"}, parents=["c0"])
    store.set_best(run_id, "c9")
    store.set_status(run_id, "aborted", error=f"the last: the candidate failed: {ATTACK}")
    text = render_text(summarize(store, run_id))
    assert "\x1b" not in text and "\r" not in text
    assert "+\\x1b[2J\\x1b[31mPWNED\\r" in text  # the diff line, escaped
    assert "error: the last: the candidate failed: \\x1b[2J\\x1b[31mPWNED\\r" in text
    page = render_html(summarize(store, run_id))
    assert "\x1b" not in page and "\\x1b[2J\\x1b[31mPWNED\\r" in page


def test_an_evaluation_only_run_reads_as_one(store: RunStore):
    run_id = _scored_run(
        store,
        {"a1": [1.0, 1.0, "candidate", "metric"], "b2": [1.0, 0.0, 0.0, 0.0]},
        engine=EVALUATION,
    )
    store.set_note(run_id, "evaluated", {"a1": "seed", "b2": "better.md"})
    store.set_status(run_id, "finished")
    s = summarize(store, run_id)
    assert (s.seed, s.best) == (None, None)  # nothing was optimized
    assert {c.id: c.val_score for c in s.candidates} == {
        "a1": pytest.approx(2 / 3),
        "b2": pytest.approx(0.25),
    }
    text = render_text(s)
    assert f"Run {run_id}  finished  evaluation only (skynet eval)" in text
    assert "nothing was optimized" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("a1"))
    assert "seed" in row and "0.667 (1 candidate failure as 0, 1 metric error left out)" in row
    assert "better.md" in text and "Evaluations: 8" in text
    for absent in ("baseline", "Best candidate against the seed", "Proposals", "evaluated:"):
        assert absent not in text
    page = render_html(s)
    assert "evaluation only" in page and "<svg" not in page and "better.md" in page


def test_the_html_diff_is_one_block_per_line_and_wraps_in_the_windows_width(store: RunStore):
    import re

    s = summarize(store, make_run(store))
    page = render_html(s)
    (diff,) = re.findall(r'<pre class="diff">(.*?)</pre>', page, re.S)
    # One element per line of the diff, and nothing between them that would show as a blank line.
    blocks = re.findall(r'<span class="(\w+)">(.*?)</span>', diff, re.S)
    assert len(blocks) == len(s.diff["prompt"].splitlines())
    assert re.sub(r'<span class="\w+">.*?</span>', "", diff, flags=re.S) == ""
    assert [c for c, _ in blocks[:3]] == ["file", "file", "hunk"]
    assert ("del", "-Answer with one label.") in blocks
    # Long lines wrap; the page takes the window's width.
    assert "white-space:pre-wrap" in page and "overflow-wrap:anywhere" in page
    assert "max-width:1000px" not in page
