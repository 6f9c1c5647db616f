"""`skynet show RUN --json`: the run's summary as one JSON document, read back with json.loads
from runs built in a real run store; and `RunResult.gain` from a real `skynet.optimize` on the
loopback server."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from projects import BETTER, COUNTRIES, task_responder
from runs.test_report import _eval, make_run

import skynet
from skynet.cli import main
from skynet.gain import BETTER as VERDICT_BETTER
from skynet.gain import NO_DIFFERENCE, paired_gain
from skynet.models.ledger import CallRecord
from skynet.runs import RunStore, runs_db_path


@pytest.fixture
def store(tmp_path: Path):
    s = RunStore(runs_db_path(tmp_path))
    yield s
    s.close()


def _show_json(folder: Path, run_id: str, capsys) -> dict:
    assert main(["-C", str(folder), "show", run_id, "--json"]) == 0
    captured = capsys.readouterr()
    return json.loads(captured.out)  # stdout is the document alone


def test_the_summary_as_json_reads_back_with_every_figure(store, tmp_path, capsys):
    run_id = make_run(store)
    confirmation = {"state": "done", "items": 2, "calls": 4, "stopped_by": ""}
    store.set_note(run_id, "confirmation", confirmation)

    doc = _show_json(tmp_path, run_id, capsys)

    assert list(doc) == [
        "schema", "run_id", "status", "engine", "stopped_by", "items", "baseline", "best",
        "gain", "confirmation", "metric_calls", "cost", "errors", "error_kinds", "val_from_train",
        "detailed",
    ]  # fmt: skip
    assert doc["schema"] == 1
    assert (doc["run_id"], doc["status"], doc["engine"]) == (run_id, "finished", "gepa")
    assert doc["stopped_by"] is None
    assert doc["items"] == {"val": 4, "test": 2}
    assert doc["val_from_train"] is False  # val given apart (tests/test_valset_none.py: not)
    # c0: val 1, 0, 0, 1; test 0, 1. c2: val 1, 1, 0 and a metric error; test 1, 1.
    assert doc["baseline"] == {"id": "c0", "val": 0.5, "test": 0.5}
    assert doc["best"] == {"id": "c2", "val": pytest.approx(2 / 3), "test": 1.0}
    gain = doc["gain"]
    assert gain["split"] == "test" and gain["n"] == 2
    assert gain["estimate"] == 0.5 and (gain["a_mean"], gain["b_mean"]) == (0.5, 1.0)
    # One item changed (0 -> 1), none the other way: McNemar's exact p is 1.
    assert gain["p_value"] == 1.0 and gain["verdict"] == NO_DIFFERENCE
    assert gain["method"] == "McNemar's exact test; t interval"
    # Val, on the 3 items both counted (c2's metric error on v4 is left out for both): 1/3.
    assert gain["val_estimate"] == pytest.approx(1 / 3)
    assert gain == pytest.approx(
        paired_gain([0.0, 1.0], [1.0, 1.0], split="test", val_estimate=1 / 3).as_dict()
    )
    assert gain["low"] < 0 < 0.5 < gain["high"]  # two items: a wide interval
    assert doc["confirmation"] == confirmation
    # 15 train and val evaluations are the search's; the 4 test ones the confirmation's.
    assert doc["metric_calls"] == {"search": 15, "confirmation": 4, "max": 20}
    assert doc["cost"]["task"] == {
        "calls": 3,
        "cost_usd": pytest.approx(0.02),  # the cached call is not paid again
        "unpriced_calls": 0,
        "untokened_calls": 0,
        "unmeasured_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
    }
    # The reflection's one call had no known price: its cost is unknown, not 0.
    assert doc["cost"]["reflection"]["cost_usd"] is None
    assert doc["cost"]["reflection"]["unpriced_calls"] == 1
    assert doc["cost"]["metric"] == {
        "calls": 0,
        "cost_usd": 0.0,  # no call: nothing spent, known
        "unpriced_calls": 0,
        "untokened_calls": 0,
        "unmeasured_calls": 0,
        "input_tokens": 0,
        "output_tokens": 0,
    }
    assert (doc["errors"], doc["error_kinds"]) == (1, {"metric": 1})


def test_a_run_with_no_test_evaluation_has_a_null_gain(store, tmp_path, capsys):
    run_id = store.create_run(
        config={},
        dataset_hash="d" * 64,
        metric_hash="m1",
        seed=0,
        engine="gepa",
        budget={},
        versions={},
    )
    store.add_candidate(run_id, "c0", {"prompt": "a"})
    store.set_seed_candidate(run_id, "c0")
    store.add_candidate(run_id, "c1", {"prompt": "b"}, parents=["c0"])
    for cand, item, score in [("c0", "v1", 0.0), ("c0", "v2", 0.0), ("c1", "v1", 1.0), ("c1", "v2", 0.0)]:  # fmt: skip
        _eval(store, run_id, cand, "val", item, score)
    store.set_best(run_id, "c1")
    store.record_call(
        run_id,
        CallRecord(role="task", model="openai/a", elapsed_ms=5, input_tokens=7, cost_usd=0.5),
    )
    store.set_note(run_id, "confirmation", {"state": "no test split", "items": 0, "calls": 0})
    store.set_note(run_id, "stopped_by", "max_minutes = 1 reached")
    store.set_status(run_id, "finished")

    doc = _show_json(tmp_path, run_id, capsys)

    assert doc["gain"] is None
    assert doc["baseline"] == {"id": "c0", "val": 0.0, "test": None}
    assert doc["best"] == {"id": "c1", "val": 0.5, "test": None}
    assert doc["items"] == {"val": 2, "test": 0}
    assert doc["confirmation"]["state"] == "no test split"
    assert doc["stopped_by"] == "max_minutes = 1 reached"
    assert doc["metric_calls"] == {"search": 4, "confirmation": 0, "max": None}
    assert doc["cost"]["task"]["cost_usd"] == 0.5 and doc["cost"]["task"]["input_tokens"] == 7
    assert (doc["errors"], doc["error_kinds"]) == (0, {})


@pytest.mark.parametrize(
    "extra, says",
    [
        (
            ["--html", "report.html"],
            "takes --json (the summary on stdout) or --html FILE (the pages), not both",
        ),
        (["OTHER"], "--json summarizes one run, not two"),
    ],
)
def test_json_with_html_or_two_runs_is_one_line(store, tmp_path, capsys, extra, says):
    run_id = make_run(store)
    assert main(["-C", str(tmp_path), "show", run_id, *extra, "--json"]) != 0
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("skynet: error: ") and says in lines[0]
    assert captured.out == ""
    assert not (tmp_path / "report.html").exists()


@pytest.mark.slow
def test_run_result_gain_from_a_real_optimize(tmp_path, scripted_server, monkeypatch, capsys):
    """The scripted model names capitals only once the instruction asks for it: the best is right
    on every test item, the seed on none; the gain is the JSON document's."""
    scripted_server.responder = task_responder
    rows = [
        {"id": f"c{i}", "country": country, "capital": capital}
        for i, (country, capital) in enumerate(COUNTRIES)
    ]
    monkeypatch.chdir(tmp_path)
    result = skynet.optimize(
        "Tell the user about the country.",
        metric=_score,
        train=rows[0:4],
        val=rows[4:8],
        test=rows[8:16],
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        out=io.StringIO(),
        models={
            "task": "openai/skynet-test",
            "reflection": "openai/skynet-test",
            "endpoints": {"openai/skynet-test": {"api_base": scripted_server.url}},
        },
        engine={"name": "gepa", "concurrency": 2},
        budget={"max_metric_calls": 16},
    )
    assert result.best == BETTER
    gain = result.gain
    assert gain is not None
    assert (gain.split, gain.n, gain.estimate, gain.a_mean, gain.b_mean) == (
        "test",
        8,
        1.0,
        0.0,
        1.0,
    )
    # Every one of 8 items changed 0 -> 1: McNemar's exact p = 2 / 2**8.
    assert gain.p_value == pytest.approx(2 / 2**8) and gain.verdict == VERDICT_BETTER
    assert (gain.low, gain.high) == (1.0, 1.0)  # no spread: every item moved by 1
    assert gain.val_estimate == 1.0
    assert _show_json(tmp_path, result.run_id, capsys)["gain"] == gain.as_dict()


def _score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else f"name {expected['capital']}"}
