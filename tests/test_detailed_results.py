"""RunResult.detailed_results and the "detailed" key of `skynet show RUN --json`: dspy.GEPA's
`detailed_results` (track_stats=True) built from the run store, from real `skynet.optimize` runs
on the loopback server, checked against the evaluations the store recorded."""

from __future__ import annotations

import io
import json

import pytest
from projects import BETTER, COUNTRIES, never_perfect

import skynet
from skynet.cli import main
from skynet.evaluation import CANDIDATE_ERROR, METRIC_ERROR
from skynet.runs import RunStore
from skynet.runs.report import in_pool, summarize
from skynet.testing import reply

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES)
]
PERU = "c3"  # never_perfect never knows Peru's capital: every candidate scores 0 on it


def _capital(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else f"name {expected['capital']}"}


def _models(url: str) -> dict:
    return {
        "task": "openai/skynet-test",
        "reflection": "openai/skynet-test",
        "endpoints": {"openai/skynet-test": {"api_base": url, "timeout_s": 10}},
    }


def _show_json(folder, run_id: str, capsys) -> dict:
    capsys.readouterr()
    assert main(["-C", str(folder), "show", run_id, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _recorded(result: skynet.RunResult) -> dict[tuple[str, str], tuple]:
    """(candidate, val item) -> (score, error kind, output) as the store recorded them under the
    run's metric hash."""
    with RunStore(result.store / "runs.db", readonly=True) as store:
        run = store.get_run(result.run_id)
        return {
            (e.candidate_id, e.item_id): (e.score, e.error_kind, e.output)
            for e in store.evaluations(result.run_id, split="val")
            if e.metric_hash == run.metric_hash
        }


def _fronts(ids: list[str], subscores: list[dict[str, float]]) -> dict[str, set[str]]:
    """The Pareto sets recomputed from the matrix: per item, the ids with its highest score."""
    items = {item for row in subscores for item in row}
    fronts = {}
    for item in items:
        top = max(row[item] for row in subscores if item in row)
        fronts[item] = {
            cid for cid, row in zip(ids, subscores, strict=True) if row.get(item) == top
        }
    return fronts


def test_detailed_results_match_the_store_and_the_json(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = never_perfect
    monkeypatch.chdir(tmp_path)
    val = ROWS[2:6]  # Italy, Peru, Egypt, Kenya
    result = skynet.optimize(
        "Tell the user about the country.",
        metric=_capital,
        train=ROWS[6:10],
        val=val,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        out=io.StringIO(),
        models=_models(scripted_server.url),
        engine={"name": "gepa", "concurrency": 2},
        budget={"max_metric_calls": 24},
    )
    assert result.best == BETTER
    detail = result.detailed_results
    with RunStore(result.store / "runs.db", readonly=True) as store:
        summary = summarize(store, result.run_id)
        seed_id = store.get_run(result.run_id).seed_candidate_id
    # The candidates are the report's pool, in its order, with their parents and val scores.
    pool = [c for c in summary.candidates if in_pool(summary, c)]
    assert detail.candidates == [c.id for c in pool] and detail.candidates[0] == seed_id
    assert detail.parents == [c.parents for c in pool] and detail.parents[0] == []
    assert detail.val_aggregate_scores == [c.val_score for c in pool]
    assert detail.val_aggregate_scores[0] == 0.0
    assert detail.best_candidate == summary.best.id and detail.best_idx is not None
    assert detail.val_aggregate_scores[detail.best_idx] == 0.75 == result.best_score
    # Every subscore is the score the store recorded for that candidate on that val item.
    recorded = _recorded(result)
    val_ids = {row["id"] for row in val}
    for cid, row in zip(detail.candidates, detail.val_subscores, strict=True):
        assert set(row) == val_ids  # nothing failed: every val item scored
        assert row == {item: recorded[cid, item][0] for item in val_ids}
    # The Pareto sets, recomputed from the matrix: on Peru every candidate ties at 0 (the seed
    # among them); elsewhere the best alone is best.
    assert detail.per_val_instance_best_candidates == _fronts(
        detail.candidates, detail.val_subscores
    )
    assert detail.per_val_instance_best_candidates[PERU] == set(detail.candidates)
    assert len(detail.candidates) >= 2 and seed_id in detail.per_val_instance_best_candidates[PERU]
    for item in val_ids - {PERU}:
        assert detail.best_candidate in detail.per_val_instance_best_candidates[item]
        assert seed_id not in detail.per_val_instance_best_candidates[item]
        assert detail.highest_score_achieved_per_val_task[item] == 1.0
    assert detail.highest_score_achieved_per_val_task[PERU] == 0.0
    # The best outputs are the recorded outputs of each item's Pareto set.
    for item, pairs in detail.best_outputs_valset.items():
        assert {cid for cid, _ in pairs} == detail.per_val_instance_best_candidates[item]
        assert all(output == recorded[cid, item][2] for cid, output in pairs)
    assert "Cairo" in str(dict(detail.best_outputs_valset["c4"])[detail.best_candidate])
    # Discovery: the seed before any call; each later one after the calls recorded before it.
    counts = detail.discovery_eval_counts
    assert counts[0] == 0 and all(isinstance(n, int) and n > 0 for n in counts[1:])
    assert counts == sorted(counts) and counts[-1] < detail.total_metric_calls
    # `skynet show RUN --json` carries the same matrix and Pareto sets.
    doc = _show_json(tmp_path, result.run_id, capsys)["detailed"]
    assert doc["candidates"] == detail.candidates
    assert doc["val_subscores"] == detail.val_subscores
    assert doc["val_aggregate_scores"] == detail.val_aggregate_scores
    assert {k: set(v) for k, v in doc["per_val_instance_best_candidates"].items()} == (
        detail.per_val_instance_best_candidates
    )
    assert doc["per_val_instance_best_candidates"][PERU] == detail.candidates  # pool order
    assert doc["highest_score_achieved_per_val_task"] == detail.highest_score_achieved_per_val_task
    assert (doc["best_candidate"], doc["best_idx"]) == (detail.best_candidate, detail.best_idx)
    assert doc["discovery_eval_counts"] == counts


# The seed is one short (0..n-1) and crashes on n = 3; the fix is right everywhere.
CRASHING = (
    "def run(input):\n"
    "    if input['n'] == 3:\n"
    "        raise ValueError('three')\n"
    "    return sum(range(input['n']))\n"
)
FIXED = "def run(input):\n    return sum(range(input['n'] + 1))\n"


def _faulty_metric(input, output, expected=None):
    if input["n"] == 5:
        raise RuntimeError("the metric cannot score n = 5")
    right = output == expected["total"]
    return float(right), {"feedback": "right" if right else f"expected {expected['total']}"}


@pytest.mark.slow
def test_a_candidate_failure_is_0_and_a_metric_fault_is_left_out(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = lambda body: reply(f"```python\n{FIXED}```")
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"n{n}", "n": n, "total": n * (n + 1) // 2} for n in range(12)]
    result = skynet.optimize(
        skynet.Code(CRASHING),
        metric=_faulty_metric,
        train=rows[0::2],
        val=rows[1::2],  # n1, n3 (the seed crashes), n5 (the metric fails), n7, n9, n11
        inputs=["n"],
        outputs=["total"],
        out=io.StringIO(),
        models=_models(scripted_server.url),
        engine={"name": "gepa", "concurrency": 2},
        budget={"max_metric_calls": 30},
        self_test="off",  # its self-test would refuse the metric that fails on n5
    )
    detail = result.detailed_results
    recorded = _recorded(result)
    seed_id, best_id = detail.candidates[0], detail.best_candidate
    assert best_id != seed_id and best_id in detail.candidates
    assert recorded[seed_id, "n3"][:2] == (None, CANDIDATE_ERROR)
    assert all(recorded[cid, "n5"][:2] == (None, METRIC_ERROR) for cid in detail.candidates)
    seed, best = detail.val_subscores[0], detail.val_subscores[detail.best_idx]
    # The seed's own crash counts 0; the metric's fault is left out of every row and said why.
    assert seed == {"n1": 0.0, "n3": 0.0, "n7": 0.0, "n9": 0.0, "n11": 0.0}
    assert best == {"n1": 1.0, "n3": 1.0, "n7": 1.0, "n9": 1.0, "n11": 1.0}
    assert all(left == {"n5": METRIC_ERROR} for left in detail.val_left_out)
    assert detail.val_aggregate_scores[0] == 0.0 == result.baseline_score
    assert detail.val_aggregate_scores[detail.best_idx] == 1.0 == result.best_score
    # No candidate has a counted score on n5: it has no Pareto set; the best is alone on n3.
    assert "n5" not in detail.per_val_instance_best_candidates
    assert "n5" not in detail.highest_score_achieved_per_val_task
    assert detail.per_val_instance_best_candidates == _fronts(
        detail.candidates, detail.val_subscores
    )
    assert seed_id not in detail.per_val_instance_best_candidates["n3"]
    assert best_id in detail.per_val_instance_best_candidates["n3"]
    assert (best_id, 6) in detail.best_outputs_valset["n3"]  # 0 + 1 + 2 + 3
    doc = _show_json(tmp_path, result.run_id, capsys)["detailed"]
    assert doc["val_subscores"][0] == seed and doc["val_left_out"][0] == {"n5": METRIC_ERROR}
    assert "n5" not in doc["per_val_instance_best_candidates"]


def test_a_partly_evaluated_candidate_is_not_in_the_pool_and_a_fault_is_left_out(tmp_path):
    """tests/runs/test_report.py's run: c0 the seed (val 1, 0, 0, 1), c1 on 3 of 4 val items,
    c2 the best (val 1, 1, 0 and a metric error on v4), each after a 2-item train minibatch."""
    from runs.test_report import make_run

    from skynet.runs import runs_db_path
    from skynet.runs.detail import detailed_results

    with RunStore(runs_db_path(tmp_path)) as store:
        detail = detailed_results(summarize(store, make_run(store)))
    assert detail.candidates == ["c0", "c2"] and detail.parents == [[], ["c0"]]
    assert detail.val_aggregate_scores == [0.5, pytest.approx(2 / 3)]
    assert detail.val_subscores == [
        {"v1": 1.0, "v2": 0.0, "v3": 0.0, "v4": 1.0},
        {"v1": 1.0, "v2": 1.0, "v3": 0.0},
    ]
    assert detail.val_left_out == [{}, {"v4": METRIC_ERROR}]
    # v4: only the seed has a counted score there, so it is the whole Pareto set.
    assert detail.per_val_instance_best_candidates == {
        "v1": {"c0", "c2"}, "v2": {"c2"}, "v3": {"c0", "c2"}, "v4": {"c0"},
    }  # fmt: skip
    assert detail.highest_score_achieved_per_val_task == {
        "v1": 1.0,
        "v2": 1.0,
        "v3": 0.0,
        "v4": 1.0,
    }
    # c2's first val evaluation is seq 12: 11 search calls before it (4 + 2 + 3 + 2).
    assert detail.discovery_eval_counts == [0, 11] and detail.total_metric_calls == 15
    assert (detail.best_candidate, detail.best_idx) == ("c2", 1)


@pytest.mark.parametrize("field", ["val_subscores", "per_val_instance_best_candidates"])
def test_the_result_is_frozen(tmp_path, field):
    from dataclasses import FrozenInstanceError

    from skynet.runs.detail import DetailedResults

    detail = DetailedResults(
        candidates=[],
        parents=[],
        val_aggregate_scores=[],
        val_subscores=[],
        val_left_out=[],
        per_val_instance_best_candidates={},
        highest_score_achieved_per_val_task={},
        best_outputs_valset={},
        discovery_eval_counts=[],
        total_metric_calls=0,
        best_candidate=None,
    )
    assert detail.best_idx is None and detail.num_candidates == 0
    with pytest.raises(FrozenInstanceError):
        setattr(detail, field, None)
