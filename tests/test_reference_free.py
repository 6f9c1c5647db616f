"""A reference-free search (issue 28): no output columns, no expected answers, a metric
`score(input, output)`, as gepa's optimize_anything runs one. The self-test checks what it can
(each item's return value on an empty output) and says what it skipped."""

from __future__ import annotations

import json

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder
from test_python_api import _tables

import skynet
from skynet.cli import main
from skynet.runs import RunStore

METRIC = """
def score(input, output):
    good = "capital" in output.lower()
    return float(good), {"feedback": "good" if good else "name the capital city"}
"""


def _score(input, output):
    good = "capital" in output.lower()
    return float(good), {"feedback": "good" if good else "name the capital city"}


@pytest.mark.slow
def test_a_project_with_no_outputs_runs_and_check_says_what_it_skipped(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=30)
    data = project / "data.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    data.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "capital"}) + "\n" for r in rows)
    )
    toml = project / "skynet.toml"
    text = toml.read_text()
    assert 'outputs = ["capital"]\n' in text
    toml.write_text(text.replace('outputs = ["capital"]\n', ""))
    (project / "metric.py").write_text(METRIC)
    assert main(["-C", str(project), "check"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert (
        "metric self-test passed on 16 item(s) (16 item(s) with no expected answer: their return "
        "value on an empty output was checked; the answer key and the null control were skipped)"
    ) in out
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        run = store.list_runs()[0]
        best = store.candidates(run.id)[-1].content["instructions"]
    assert best == BETTER


def test_a_reference_free_call_from_python(tmp_path, scripted_server):
    scripted_server.responder = task_responder
    rows = [{"id": f"c{i}", "country": c} for i, (c, _) in enumerate(COUNTRIES)]
    result = skynet.optimize(
        "Tell the user about the country.",
        metric=_score,
        train=rows[0::2],
        val=rows[1::2],
        inputs=["country"],
        user="Country: {country}",
        store=tmp_path / "s",
        **_tables(scripted_server.url, budget=30),
    )
    assert (result.baseline_score, result.best_score, result.best) == (0.0, 1.0, BETTER)
