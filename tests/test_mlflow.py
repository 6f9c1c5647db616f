"""MLflow: `skynet export mlflow` and `[tracking] mlflow` live logging, read back through MLflow's
own client from a real tracking server on 127.0.0.1 (a subprocess, started once per module)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore, runs_db_path
from skynet.testing.server import ScriptedServer
from skynet.tracking import RUN_TAG, MlflowTracker, flatten_config

pytestmark = pytest.mark.slow

pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

# MLflow's client and server would report usage over the network; the guard refuses, and
# nothing is sent.
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
os.environ.update(QUIET)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tracking(tmp_path_factory) -> Iterator[str]:
    """A real MLflow tracking server (SQLite backend, artifacts served through it)."""
    root = tmp_path_factory.mktemp("mlflow")
    port = _free_port()
    env = {
        **os.environ,
        **QUIET,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # the server imports litellm: no fetch
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no job runner: a faster start
    }
    log = open(root / "server.log", "w")  # noqa: SIM115 - the server's for its whole life
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--serve-artifacts",
            "--artifacts-destination",
            str(root / "artifacts"),
        ],  # fmt: skip
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers are in its process group, ended with it
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if server.poll() is not None:
                pytest.fail(f"mlflow server exited: {(root / 'server.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("mlflow server did not answer /health in 120 s")
            time.sleep(0.2)
        yield url
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        except ProcessLookupError:
            pass
        log.close()


@pytest.fixture(scope="module")
def model_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    server.responder = task_responder
    try:
        yield server
    finally:
        server.stop()


def _run(project: Path) -> str:
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(runs_db_path(project)) as store:
        latest = store.latest_run()
        assert latest is not None
        return latest.id


@pytest.fixture(scope="module")
def finished(tmp_path_factory, model_server) -> tuple[Path, str]:
    """A finished run on the scripted capitals project: seed 0.0 on val, best 1.0."""
    project = make_project(tmp_path_factory.mktemp("export") / "capitals", model_server.url)
    return project, _run(project)


def _expected(project: Path, run_id: str) -> tuple[list[tuple[int, float]], dict]:
    """Each candidate's val score at the metric calls used when it became known, from the run
    store's records: (calls, mean) in order; and the store's figures."""
    with RunStore(runs_db_path(project)) as store:
        row = store.get_run(run_id)
        evals = store.evaluations(run_id)
        cost = store.cost_by_role(run_id)
        candidates = {c.id: c.content for c in store.candidates(run_id)}
    val_items = {e.item_id for e in evals if e.split == "val"}
    points = []
    for cid in {e.candidate_id for e in evals}:
        mine = [e for e in evals if e.candidate_id == cid and e.split == "val"]
        if {e.item_id for e in mine} != val_items:
            continue
        known_at = max(e.seq for e in mine)
        used = sum(1 for e in evals if e.split != "test" and e.seq <= known_at)
        points.append((used, sum(e.score or 0.0 for e in mine) / len(mine)))
    facts = {"row": row, "cost": cost, "best": candidates[row.best_candidate_id]}
    return sorted(points), facts


def _mlflow_run(client: MlflowClient, experiment: str, run_id: str) -> list:
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment}"
    return client.search_runs([found.experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{run_id}'")


def _history(client: MlflowClient, mlflow_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(mlflow_id, key))


def _artifact(client: MlflowClient, mlflow_id: str, path: str, tmp_path: Path) -> str:
    local = client.download_artifacts(mlflow_id, path, str(tmp_path))
    return Path(local).read_text(encoding="utf-8")


def test_export_logs_params_metrics_and_artifacts_and_twice_is_one_run(
    tracking, finished, tmp_path, capsys
):
    project, run_id = finished
    args = ["export", "mlflow", run_id, "--tracking-uri", tracking, "--dir", str(project)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"exported run {run_id} as MLflow run" in out and "experiment 'capitals'" in out

    client = MlflowClient(tracking_uri=tracking)
    (logged,) = _mlflow_run(client, "capitals", run_id)
    expected, facts = _expected(project, run_id)
    row = facts["row"]

    params = logged.data.params
    assert params == flatten_config(row.config)
    assert params["engine.name"] == "gepa" and params["budget.max_metric_calls"] == "40"
    assert params["data.inputs"] == '["country"]'
    assert (
        params["models.endpoints.openai/skynet-test.api_base"]
        == row.config["models"]["endpoints"]["openai/skynet-test"]["api_base"]
    )

    tags = logged.data.tags
    assert tags[RUN_TAG] == run_id and tags["skynet.status"] == "finished"
    assert tags["skynet.engine"] == "gepa"
    assert tags["skynet.dataset_hash"] == row.dataset_hash
    assert tags["skynet.metric_hash"] == row.metric_hash
    assert logged.info.status == "FINISHED"

    mlflow_id = logged.info.run_id
    assert len(expected) >= 2  # the seed and at least one better candidate
    assert _history(client, mlflow_id, "val_score") == expected
    best_so_far, running = [], float("-inf")
    for step, value in expected:
        running = max(running, value)
        best_so_far.append((step, running))
    assert _history(client, mlflow_id, "best_val_score") == best_so_far
    metrics = logged.data.metrics
    assert metrics["baseline_val_score"] == 0.0 and metrics["best_val_score"] == 1.0
    # No test split: the val gain only; no test gain, no gain params.
    assert metrics["gain_val"] == 1.0 and "gain_test" not in metrics
    assert "gain_verdict" not in params and "skynet.gain" not in tags
    task = facts["cost"]["task"]
    assert metrics["calls/task"] == task.calls > 0
    assert metrics["cost_usd/task"] == pytest.approx(task.cost_usd) and task.cost_usd > 0
    assert metrics["calls/reflection"] >= 1

    for name, text in facts["best"].items():
        assert _artifact(client, mlflow_id, f"best/{name}.txt", tmp_path) == text
    assert BETTER in _artifact(client, mlflow_id, "best/instructions.txt", tmp_path)
    report = _artifact(client, mlflow_id, "report.txt", tmp_path)
    assert run_id in report and "baseline" in report
    assert "<html" in _artifact(client, mlflow_id, "report.html", tmp_path).lower()

    # Again: the same MLflow run, updated; no metric point logged twice.
    assert main(args) == 0
    assert f"updated run {run_id} as MLflow run {mlflow_id}" in capsys.readouterr().out
    assert [r.info.run_id for r in _mlflow_run(client, "capitals", run_id)] == [mlflow_id]
    assert _history(client, mlflow_id, "val_score") == expected
    assert len(client.get_metric_history(mlflow_id, "baseline_val_score")) == 1


def test_live_logging_makes_a_finished_mlflow_run(tracking, model_server, tmp_path, capsys):
    project = make_project(tmp_path / "live", model_server.url)
    with open(project / "skynet.toml", "a") as toml:
        toml.write(f'\n[tracking]\nmlflow = "{tracking}"\nexperiment = "live-runs"\n')
    # Six test items: the confirmation scores the seed (wrong on all) and the best (right on all).
    with open(project / "data.jsonl", "a") as data:
        for i, (country, capital) in enumerate(COUNTRIES[:6]):
            row = {"id": f"x{i}", "country": country, "capital": capital, "split": "test"}
            data.write(json.dumps(row) + "\n")
    run_id = _run(project)
    assert "warning" not in capsys.readouterr().err

    client = MlflowClient(tracking_uri=tracking)
    (logged,) = _mlflow_run(client, "live-runs", run_id)
    assert logged.info.status == "FINISHED"
    mlflow_id = logged.info.run_id
    expected, facts = _expected(project, run_id)
    # Live, each val score at the metric calls counted as the run went: the same values, in order.
    live = _history(client, mlflow_id, "val_score")
    assert [value for _, value in live] == [value for _, value in expected]
    assert logged.data.metrics["best_val_score"] == 1.0
    assert logged.data.params["tracking.mlflow"] == tracking
    # The gain, logged when the run ended: 6 of 6 items 0 -> 1, McNemar's exact p = 2 / 2**6.
    metrics, params = logged.data.metrics, logged.data.params
    assert (metrics["gain_test"], metrics["gain_test_low"], metrics["gain_test_high"]) == (1, 1, 1)
    assert metrics["gain_test_p_value"] == pytest.approx(2 / 2**6) and metrics["gain_val"] == 1.0
    assert (params["gain_verdict"], params["gain_n"]) == ("better", "6")
    assert params["gain_method"] == "McNemar's exact test; t interval"
    assert logged.data.tags["skynet.gain"].endswith("on 6 test items, p = 0.031: better")
    for name, text in facts["best"].items():
        assert _artifact(client, mlflow_id, f"best/{name}.txt", tmp_path) == text

    # Exported afterwards (the experiment from [tracking]): the same run, nothing doubled.
    assert main(["export", "mlflow", "--dir", str(project)]) == 0
    assert f"updated run {run_id}" in capsys.readouterr().out
    assert [r.info.run_id for r in _mlflow_run(client, "live-runs", run_id)] == [mlflow_id]
    assert len(client.get_metric_history(mlflow_id, "val_score")) == len(live)

    # Resumed: the same MLflow run runs again and ends again; the replayed candidates' scores
    # are not logged twice.
    with RunStore(runs_db_path(project)) as store:
        store.set_status(run_id, "stopped", error="interrupted")
    assert main(["-C", str(project), "run", "--resume", run_id]) == 0
    assert f"logged to MLflow as run {mlflow_id}" in capsys.readouterr().err
    (again,) = _mlflow_run(client, "live-runs", run_id)
    assert again.info.run_id == mlflow_id and again.info.status == "FINISHED"
    assert _history(client, mlflow_id, "val_score") == live


def test_a_tracking_server_that_is_down_warns_once_and_the_run_goes_on(
    model_server, tmp_path, capsys
):
    dead = f"http://127.0.0.1:{_free_port()}"
    project = make_project(tmp_path / "p", model_server.url)
    with open(project / "skynet.toml", "a") as toml:
        toml.write(f'\n[tracking]\nmlflow = "{dead}"\n')
    run_id = _run(project)
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "MLflow" in line]
    assert len(warnings) == 1, err
    assert warnings[0].startswith(f"warning: MLflow tracking at {dead} failed")
    assert f"skynet export mlflow {run_id}" in warnings[0] and "Traceback" not in err
    with RunStore(runs_db_path(project)) as store:
        row = store.get_run(run_id)
        assert row.status == "finished" and row.best_candidate_id != row.seed_candidate_id
        assert len(store.evaluations(run_id)) >= 8


def _one_line_error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("skynet: error: ")
    return lines[0]


def test_bad_inputs_are_one_line(tracking, finished, monkeypatch, capsys):
    project, run_id = finished
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    base = ["export", "mlflow", "--dir", str(project)]

    assert main([*base, "nope", "--tracking-uri", tracking]) == 2
    assert "no run 'nope'" in _one_line_error(capsys)

    assert main(base) == 2
    line = _one_line_error(capsys)
    assert "--tracking-uri" in line and "MLFLOW_TRACKING_URI" in line

    dead = f"http://127.0.0.1:{_free_port()}"
    assert main([*base, "--tracking-uri", dead]) == 2
    line = _one_line_error(capsys)
    assert dead in line and "--tracking-uri" in line

    # MLFLOW_TRACKING_URI is the last default.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking)
    assert main([*base, run_id]) == 0
    assert f"run {run_id}" in capsys.readouterr().out

    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # as if mlflow were not installed
    assert main([*base, "--tracking-uri", tracking]) == 2
    assert "pip install 'skynet-optimizer[mlflow]'" in _one_line_error(capsys)


def test_live_tracking_without_mlflow_installed_is_one_warning(tracking, finished, monkeypatch):
    project, run_id = finished
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)  # as if mlflow were not installed
    said: list[str] = []
    tracker = MlflowTracker(tracking, "no-mlflow", say=said.append)
    with RunStore(runs_db_path(project)) as store:
        tracker.start(store.get_run(run_id))
        tracker.val_score("c1", 0.5, 3)
        tracker.end(store, run_id)
    assert said == [
        f"warning: [tracking] mlflow = {tracking} is set, but mlflow is not installed; "
        "pip install 'skynet-optimizer[mlflow]'; this run goes on untracked"
    ]
    assert not tracker.on
