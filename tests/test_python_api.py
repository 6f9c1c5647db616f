"""skynet.optimize / evaluate / resume: the pipeline of `skynet run` and `skynet eval` from
Python, on the loopback server, with rows in memory and a metric function; the runs it records
are ordinary runs that the CLI reads."""

from __future__ import annotations

import io
import sqlite3

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder

import skynet
from skynet.cli import main

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES)
]
TRAIN, VAL = ROWS[0::2], ROWS[1::2]  # make_project's split: even rows train, odd rows val
SEED = "Tell the user about the country."


def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    fb = "right" if named else f"name the capital: {expected['capital']}"
    return float(named), {"feedback": fb}


def _tables(url: str, budget: int = 40) -> dict:
    return {
        "models": {
            "task": "openai/skynet-test",
            "reflection": "openai/skynet-test",
            "endpoints": {"openai/skynet-test": {"api_base": url, "timeout_s": 10}},
            "prices": {"openai/skynet-test": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        },
        "engine": {"name": "gepa", "concurrency": 2},
        "budget": {"max_metric_calls": budget},
    }


def _evaluations(db) -> list[tuple]:
    with sqlite3.connect(db) as c:
        return sorted(
            c.execute(
                "SELECT candidate_id, item_id, output, score, feedback FROM evaluations"
            ).fetchall()
        )


def test_optimize_from_python_records_the_run_the_cli_makes(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = task_responder
    # The CLI's run of the same project (files on disk) ...
    project = make_project(tmp_path / "cli", scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    # ... and the same run from Python, rows in memory, a metric function.
    monkeypatch.chdir(tmp_path)
    progress = io.StringIO()
    result = skynet.optimize(
        SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        out=progress,
        **_tables(scripted_server.url),
    )
    assert isinstance(result, skynet.RunResult)
    assert result.best == BETTER  # the seed's kind: a str
    assert result.baseline_score == 0.0 and result.best_score == 1.0
    assert result.status == "finished"
    assert "metric calls" in progress.getvalue()
    assert result.store == tmp_path / ".skynet"
    # The same evaluations as the CLI's run: the same candidates, outputs and scores.
    assert _evaluations(result.store / "runs.db") == _evaluations(project / ".skynet" / "runs.db")
    # An ordinary run: the CLI lists and reports it from the folder holding .skynet.
    assert main(["-C", str(tmp_path), "runs"]) == 0
    assert main(["-C", str(tmp_path), "show", result.run_id]) == 0
    report = result.report()
    assert "baseline" in report and "+1.000" in report
    page = result.to_html(tmp_path / "report.html")
    assert "<html" in page.read_text()
    assert "skynet run" in result._repr_html_() and BETTER in result._repr_html_()
    assert [c["candidate"]["instructions"] for c in result.candidates][:1] == [SEED]


def test_evaluate_scores_a_candidate_on_rows(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    tables = _tables(scripted_server.url)
    ev = skynet.evaluate(
        BETTER,
        metric=score,
        data=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        models=tables["models"],
    )
    assert ev.mean == 1.0 and len(ev.results) == len(VAL)
    assert all(r.score == 1.0 and r.feedback == "right" for r in ev.results)
    assert main(["-C", str(tmp_path), "show", ev.run_id]) == 0


def test_a_bad_table_key_is_a_config_error_naming_the_nearest(tmp_path, scripted_server):
    with pytest.raises(
        skynet.ConfigError, match=r"unknown key 'engine.nam'; did you mean 'engine.name'"
    ):
        skynet.optimize(
            SEED,
            metric=score,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            engine={"nam": "auto"},
            store=tmp_path / "s",
        )
    assert scripted_server.request_count == 0


def test_a_bad_metric_is_a_contract_error_before_any_model_call(tmp_path, scripted_server):
    scripted_server.responder = task_responder

    def bad(input, output, expected=None):
        return "high"  # not a number

    with pytest.raises(skynet.ContractError, match="Metric return value"):
        skynet.optimize(
            SEED,
            metric=bad,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            store=tmp_path / "s",
            **_tables(scripted_server.url),
        )
    assert scripted_server.request_count == 0
