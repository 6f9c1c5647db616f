"""Issue 27, faults outside the user's input: a model server that reports no token usage, one
that drips its reply a byte at a time, one that crashes mid-run, a disk that fills during a run,
and an MLflow store that MLflow itself refuses. Each ends in one line that says what happened and
what to do; what was recorded stays, and a run that stopped is resumed to its end."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from projects import CAPITAL, make_project, never_perfect, task_responder
from test_bad_inputs import one_error_line

from skynet.cli import main
from skynet.runs import RunStore
from skynet.testing import ScriptedServer


def _runs(project: Path) -> list:
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        return store.list_runs()


def _close_models() -> None:
    """The run's model session: not left to the next step (a resume opens its own)."""
    from skynet.models import client

    if client._global is not None:
        client._global.close()
        client._global = None


def _set_toml(project: Path, old: str, new: str) -> None:
    path = project / "skynet.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# -- a reply without `usage`: the cost is unknown, never $0 -----------------------------------


def test_replies_without_usage_leave_the_cost_unknown(tmp_path, capsys):
    def respond(body):
        return dataclasses.replace(task_responder(body), usage=False)

    with ScriptedServer(responder=respond) as server:
        project = make_project(tmp_path / "p", server.url)
        rc = main(["-C", str(project), "eval", "--candidate", "seed", "--split", "val"])
    _close_models()
    assert rc == 0
    assert "Traceback" not in capsys.readouterr().err
    run_id = _runs(project)[0].id
    assert main(["-C", str(project), "show", run_id]) == 0
    out = capsys.readouterr().out
    [task] = [line for line in out.splitlines() if line.strip().startswith("task ")]
    assert task.split()[-2] == "unpriced"  # a price is declared, but no tokens came back
    assert "Cost unknown for 8 call(s) (task 8): the server's reply reported no token usage" in out
    assert main(["-C", str(project), "show", run_id, "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]["task"]
    assert cost["cost_usd"] is None
    assert cost["untokened_calls"] == cost["unpriced_calls"] == 8


# -- a reply dripped one byte at a time: timeout_s bounds the whole reply ----------------------


@pytest.mark.slow
def test_a_dripping_server_is_bounded_by_timeout_s(tmp_path, capsys):
    drips = "Peru"  # one val item's reply never arrives whole: the others are answered

    def respond(body):
        step = task_responder(body)
        if body["messages"][-1]["content"].endswith(drips):
            return dataclasses.replace(step, drip_s=0.4)  # ~300 bytes: two minutes a reply
        return step

    with ScriptedServer(responder=respond) as server:
        project = make_project(tmp_path / "p", server.url)
        _set_toml(project, "timeout_s = 10", "timeout_s = 1")
        rc = main(["-C", str(project), "eval", "--candidate", "seed", "--split", "val"])
    _close_models()
    said = capsys.readouterr()
    assert rc == 0, said.err  # 7 of 8 items were scored
    assert "Traceback" not in said.err
    assert "over 7 item(s) (1 task error left out)" in said.out
    assert "task error on item 'c3': " in said.out  # Peru
    assert "no complete reply within timeout_s = 1 s" in said.out


# -- a server that crashes mid-run: the failed run says how to finish it -----------------------


@pytest.mark.slow
def test_a_crashed_server_fails_the_run_and_says_resume(tmp_path, capsys):
    answered = 0

    def respond(body):
        nonlocal answered
        answered += 1
        if answered == 12:  # after the seed's val items, before the budget ends
            threading.Thread(target=server.crash).start()  # it cannot stop itself in a reply
        return never_perfect(body)

    server = ScriptedServer(responder=respond).start()
    port = urlsplit(server.url).port
    project = make_project(tmp_path / "p", server.url, budget=60)
    _set_toml(project, "timeout_s = 10", "timeout_s = 2")
    try:
        rc = main(["-C", str(project), "run"])
    finally:
        server.stop()
        _close_models()
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err + capsys.readouterr().out
    [run] = _runs(project)
    assert run.status == "failed"
    lines = [line for line in err.splitlines() if line.startswith(("skynet:", "  run "))]
    assert lines[0].startswith("skynet: model error: model 'openai/skynet-test'")
    assert "Connection error" in lines[0]
    assert lines[1] == (
        f"  run {run.id} is kept as recorded: once that is fixed, "
        f"`skynet run --resume {run.id}` goes on from it (nothing recorded is sent again)"
    )
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        scored = {(e.candidate_id, e.item_id) for e in store.evaluations(run.id)}
    assert scored  # what was scored before the crash is kept
    # The server comes back where it was: the resume finishes the run and scores nothing twice.
    with ScriptedServer(responder=never_perfect, port=port) as back:
        assert main(["-C", str(project), "run", "--resume", run.id]) == 0
        task_prompts = [
            b["messages"][-1]["content"]
            for b in back.requests
            if b["messages"][-1]["content"].startswith("Country: ")
        ]
    _close_models()
    assert _runs(project)[0].status == "finished"
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        evaluations = store.evaluations(run.id)
    assert scored <= {(e.candidate_id, e.item_id) for e in evaluations}
    assert len(task_prompts) < len(evaluations)  # the scored ones were not sent again
    assert set(task_prompts) <= {f"Country: {c}" for c in CAPITAL}


# -- a disk that fills during a run: one line, the store intact, resume after ------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MB tmpfs at tmp_path/disk (root only), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.slow
@pytest.mark.parametrize("filler", [100, 3000], ids=["small-replies", "large-replies"])
def test_a_full_disk_fails_the_run_in_one_line_and_resume_finishes_it(small_disk, capsys, filler):
    def respond(body):
        step = never_perfect(body)
        return dataclasses.replace(step, text=step.text + " filler" * filler)

    with ScriptedServer(responder=respond) as server:
        project = make_project(small_disk / "p", server.url, budget=400)
        rc = main(["-C", str(project), "run"])
        _close_models()
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err, err
        lines = [line for line in err.splitlines() if line.startswith(("skynet:", "  "))]
        assert lines[0].startswith("skynet: error: ") and "the disk is full" in lines[0]
        [run] = _runs(project)  # the store still opens and holds the run
        # "failed" when the mark could still be written; a full disk may refuse even that.
        assert run.status in ("failed", "running")
        assert f"`skynet run --resume {run.id}` goes on from it" in lines[1]
        # Free space (the same files, on a larger disk): the run resumes to its end.
        subprocess.run(["mount", "-o", "remount,size=256m", str(small_disk)], check=True)
        assert main(["-C", str(project), "run", "--resume", run.id]) == 0
    _close_models()
    assert _runs(project)[0].status == "finished"


# -- MLflow's own refusals, said before any call ----------------------------------------------


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    with ScriptedServer(responder=task_responder) as server:
        project = make_project(tmp_path_factory.mktemp("mlflow") / "p", server.url, budget=20)
        assert main(["-C", str(project), "run"]) == 0
    _close_models()
    return project


@pytest.mark.slow
def test_a_folder_store_is_refused_in_one_line_unless_mlflow_is_told(
    finished, tmp_path, capsys, monkeypatch
):
    pytest.importorskip("mlflow")
    from mlflow import environment_variables

    if not hasattr(environment_variables, "MLFLOW_ALLOW_FILE_STORE"):
        pytest.skip("this MLflow writes folder stores without being asked")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = (tmp_path / "mlruns").as_uri()
    capsys.readouterr()
    assert main(["-C", str(finished), "export", "mlflow", "--tracking-uri", uri]) == 2
    line = one_error_line(capsys)
    assert f"writes no folder store ({uri}) unless MLFLOW_ALLOW_FILE_STORE=true" in line
    assert "--tracking-uri sqlite:///mlflow.db" in line
    assert not (tmp_path / "mlruns").exists()  # nothing was tried
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # what the line says, done
    assert main(["-C", str(finished), "export", "mlflow", "--tracking-uri", uri]) == 0
    assert (tmp_path / "mlruns").is_dir()


def test_an_experiment_name_over_mlflows_limit_names_the_flag(finished, tmp_path, capsys):
    pytest.importorskip("mlflow")
    db = tmp_path / "mlflow.db"
    capsys.readouterr()
    command = ["export", "mlflow", "--tracking-uri", f"sqlite:///{db}", "--experiment", "x" * 501]
    assert main(["-C", str(finished), *command]) == 2
    line = one_error_line(capsys)
    assert line == (
        "skynet: error: the experiment name is 501 characters, MLflow takes at most 500: give a "
        "shorter one (--experiment, or [tracking] experiment in skynet.toml; the default is the "
        "project folder's name)"
    )
    assert not db.exists()  # refused before MLflow was reached


def test_the_docs_say_what_a_folder_store_needs():
    text = (Path(__file__).resolve().parents[1] / "docs" / "tracking.md").read_text()
    assert "MLFLOW_ALLOW_FILE_STORE=true" in text
    assert "sqlite:///mlflow.db" in text
