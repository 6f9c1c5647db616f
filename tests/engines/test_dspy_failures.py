"""dspy-gepa hides nothing (issue 14): a task model that fails under dspy.GEPA is an evaluation
error as under gepa (recorded on its item, counted, shown, and the error-share abort fires), each
reflection's proposal is recorded, and DSPy's progress bars stay off stdout, where the report is.
"""

from __future__ import annotations

import json

import pytest
from artifacts.test_dspy_runs import make_dspy_project, responder

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import fail


def _dspy_reflection(body) -> bool:
    return any("new_instruction" in m["content"] for m in body["messages"])


def _dspy_gepa_project(tmp_path, url):
    project = make_dspy_project(tmp_path / "p", url)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace('name = "gepa"', 'name = "dspy-gepa"'))
    return project


def _records(project):
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        status, error = run.status, run.error
        errors = [
            (e.item_id, e.error_kind, e.error)
            for e in store.evaluations(run.id)
            if e.error is not None
        ]
        proposals = [(p.status, p.detail, p.text) for p in store.proposals(run.id)]
    return status, error, errors, proposals


@pytest.mark.slow
def test_a_dead_task_model_is_an_evaluation_error_and_aborts_the_run(
    tmp_path, scripted_server, capsys
):
    def down(body):  # every task call fails; DSPy never gets to reflect
        return responder(body) if _dspy_reflection(body) else fail(503, retry_after=0)

    scripted_server.responder = down
    project = _dspy_gepa_project(tmp_path, scripted_server.url)
    assert main(["-C", str(project), "run"]) == 2
    out, err = capsys.readouterr()
    assert "evaluations failed" in err and f"at {scripted_server.url}" in err
    assert "Fix the model's endpoint, then resume" in err
    assert "Traceback" not in out + err
    status, _, errors, _ = _records(project)
    assert status == "aborted"
    assert len(errors) >= 5
    items = {json.loads(line)["id"] for line in (project / "data.jsonl").read_text().splitlines()}
    for item, kind, text in errors:  # on its own item, the task's fault, naming the model error
        assert item in items and kind == "task" and "503" in text


@pytest.mark.slow
def test_a_program_that_raises_is_the_candidate_s_error_on_its_item(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = responder
    project = _dspy_gepa_project(tmp_path, scripted_server.url)
    (project / "program.py").write_text(
        "import dspy\n\n"
        "class Program(dspy.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.answer = dspy.Predict('country -> answer')\n\n"
        "    def forward(self, country):\n"
        "        if country == 'Peru':\n"
        "            raise ValueError('no answer for Peru')\n"
        "        return self.answer(country=country)\n\n"
        "program = Program()\n"
    )
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    status, _, errors, _ = _records(project)
    assert status == "finished"
    assert errors and {(item, kind) for item, kind, _ in errors} == {("d2", "candidate")}
    assert all("ValueError: no answer for Peru" in text for *_, text in errors)
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "Evaluation errors: 0" not in shown


def test_proposals_are_recorded_and_progress_bars_stay_off_stdout(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = responder
    project = _dspy_gepa_project(tmp_path, scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    out, _ = capsys.readouterr()
    assert "Average Metric" not in out  # DSPy's bars: in the engine log
    status, _, errors, proposals = _records(project)
    assert status == "finished" and not errors
    proposed = [(detail, text) for status, detail, text in proposals if status == "proposed"]
    assert proposed and all(text == "Name the capital city of the country." for _, text in proposed)
    assert all(detail.endswith(": self") for detail, _ in proposed)  # the program's predictor
    assert "Proposals: none" not in out and "proposed" in out
    log = next((project / ".skynet" / "runs").glob("*/engine.log")).read_text()
    assert "Average Metric" in log


@pytest.fixture(autouse=True)
def _tests_path(monkeypatch):
    """tests/ on sys.path, so the DSPy project builder is importable as artifacts.test_dspy_runs."""
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parent.parent))
    yield
    sys.modules.pop("artifacts.test_dspy_runs", None)
