"""Evaluations on worker processes and on Ray ([engine] executor = "processes" | "ray"): the same
run as on threads; one governor and one budget for the whole run; a worker killed mid-evaluation
is replaced and its evaluation recorded once, on processes and on a real local Ray cluster
(`ray start --head`) that the run joins by address; bad settings are one line."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from projects import make_project, task_responder

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path


def _with_engine(project, **keys):
    toml = (project / "skynet.toml").read_text()
    lines = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in keys.items())
    (project / "skynet.toml").write_text(toml.replace("[engine]\n", "[engine]\n" + lines, 1))
    return project


def _records(project):
    with RunStore(runs_db_path(project), readonly=True) as store:
        runs = store.list_runs()
        evaluations = sorted(
            (e.candidate_id, e.item_id, e.split, e.score, e.error)
            for run in runs
            for e in store.evaluations(run.id)
        )
        candidates = sorted(
            (c.id, json.dumps(c.parents)) for run in runs for c in store.candidates(run.id)
        )
        best = (runs[-1].best_candidate_id, runs[-1].status)  # the first recorded
        task_calls = sum(
            1
            for run in runs
            for c in store.calls(run.id)
            if c.role == "task" and c.ok and not c.cached
        )
    return evaluations, candidates, best, task_calls


def _calm(tmp_path, url):
    """The run on threads with no fault: what a faulted run must end equal to."""
    calm = make_project(tmp_path / "calm", url, budget=40, concurrency=4)
    assert main(["-C", str(calm), "run"]) == 0
    return calm


def _kill_at(moment, kill):
    """The scripted model, calling `kill()` when the server receives request number `moment`
    (mid-request: the reply to it never reaches the one who asked)."""
    seen = 0
    lock = threading.Lock()

    def respond(body):
        nonlocal seen
        with lock:
            seen += 1
            if seen == moment:
                kill()
        return task_responder(body)

    return respond


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "ray"])
def test_workers_record_the_same_run_as_threads(tmp_path, scripted_server, capsys, executor):
    scripted_server.responder = task_responder
    threads = make_project(tmp_path / "threads", scripted_server.url, budget=40, concurrency=4)
    assert main(["-C", str(threads), "run"]) == 0
    processes = _with_engine(
        make_project(tmp_path / executor, scripted_server.url, budget=40, concurrency=4),
        executor=executor,
        workers=2,
    )
    assert main(["-C", str(processes), "run"]) == 0
    capsys.readouterr()
    evaluations, candidates, best, task_calls = _records(processes)
    assert (evaluations, candidates, best) == _records(threads)[:3]
    assert best[1] == "finished" and len(evaluations) > 8
    # Every task call the workers made is in the driver's records, each once.
    assert task_calls == _records(threads)[3] > 0
    assert multiprocessing.active_children() == []  # the workers are gone with the run


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["processes", "ray"])
def test_the_governor_is_one_limit_for_every_worker(tmp_path, scripted_server, capsys, executor):
    in_flight = peak = 0
    lock = threading.Lock()

    def respond(body):
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.05)
        with lock:
            in_flight -= 1
        return task_responder(body)

    scripted_server.responder = respond
    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url, budget=30, concurrency=8),
        executor=executor,
        workers=2,
    )
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(
        toml.replace("timeout_s = 10", "timeout_s = 10\nmax_concurrent = 2")
    )
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    # Eight evaluations in flight on two workers, and never more than two requests at once.
    assert peak == 2


@pytest.mark.slow
def test_the_money_budget_is_one_budget_for_every_worker(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    scripted_server.bill(input_per_mtok=1.0, output_per_mtok=2.0)
    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url, budget=200, concurrency=8),
        executor="processes",
        workers=2,
    )
    limit = 0.002
    assert main(["-C", str(project), "run", "--max-cost-usd", str(limit)]) == 0
    out = capsys.readouterr()
    assert "max_cost_usd" in out.out + out.err
    # What the server billed (every worker's calls) stays within the one limit.
    assert 0 < scripted_server.billed_usd <= limit


@pytest.mark.slow
def test_a_killed_worker_is_replaced_and_its_evaluation_recorded_once(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    calm = _calm(tmp_path, scripted_server.url)

    def kill_a_worker():
        workers = [p for p in multiprocessing.active_children() if "worker" in p.name]
        os.kill(workers[0].pid, signal.SIGKILL)

    scripted_server.responder = _kill_at(12, kill_a_worker)
    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=4),
        executor="processes",
        workers=2,
    )
    assert main(["-C", str(project), "run"]) == 0
    said = capsys.readouterr().err
    assert "a worker process died" in said
    evaluations, candidates, best, _ = _records(project)
    assert (evaluations, candidates, best) == _records(calm)[:3]
    pairs = [(c, i) for c, i, *_ in evaluations]
    assert len(pairs) == len(set(pairs))  # none recorded twice


@pytest.mark.parametrize(
    ("setting", "expected"),
    [
        ('executor = "rays"', "engine.executor"),
        ("workers = 0", "engine.workers = 0"),
    ],
)
def test_bad_executor_settings_are_one_line(tmp_path, scripted_server, capsys, setting, expected):
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = (project / "skynet.toml").read_text()
    (project / "skynet.toml").write_text(toml.replace("[engine]\n", f"[engine]\n{setting}\n", 1))
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expected in err, err
    assert scripted_server.request_count == 0


@pytest.mark.slow
def test_serving_the_governors_leaves_the_process_streams_alone(monkeypatch):
    # multiprocessing's Server.serve_forever resets sys.stdout and sys.stderr when it ends: in a
    # notebook, the driver's output would leave the notebook. The coordinator must not.
    import io

    from skynet.executors.coordinator import connect, serve
    from skynet.models import Models, ModelsConfig

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    address, authkey, stop = serve(Models(ModelsConfig(cache_path=None)))
    assert connect(address, authkey).limited() is False
    stop()
    time.sleep(1.5)  # serve_forever noticed its stop event within a second
    assert sys.stdout is out and sys.stderr is err


def _actor_pids() -> list[int]:
    """The processes of Skynet's Ray actors on this machine (Ray names them ray::_Actor)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.startswith(b"ray::_Actor"):
                found.append(int(entry.name))
    return found


@pytest.fixture
def ray_cluster(tmp_path):
    """A real Ray cluster on 127.0.0.1 (`ray start --head`, two CPUs), stopped afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    subprocess.run(
        [*ray, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
        check=True, capture_output=True, timeout=180,
    )  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([*ray, "stop", "--force"], capture_output=True, timeout=120)


@pytest.mark.slow
def test_a_run_joins_a_ray_cluster_and_survives_a_killed_worker(
    tmp_path, scripted_server, capsys, ray_cluster
):
    scripted_server.responder = task_responder
    calm = _calm(tmp_path, scripted_server.url)
    killed = []

    def kill_an_actor():
        pids = _actor_pids()
        os.kill(pids[0], signal.SIGKILL)
        killed.append(pids[0])

    scripted_server.responder = _kill_at(12, kill_an_actor)
    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=4),
        executor="ray",
        workers=2,
        ray_address=ray_cluster,
    )
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    assert killed  # a worker did die during the run
    evaluations, candidates, best, _ = _records(project)
    assert (evaluations, candidates, best) == _records(calm)[:3]
    pairs = [(c, i) for c, i, *_ in evaluations]
    assert len(pairs) == len(set(pairs))
    assert _actor_pids() == []  # the run's actors are gone with it


def test_a_ray_cluster_that_cannot_be_reached_is_one_line(tmp_path, scripted_server, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url),
        executor="ray",
        ray_address=f"127.0.0.1:{port}",
    )
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("skynet: error: [engine] ray_address = ") and f":{port}" in err, err
    assert "no Ray cluster answers there" in err
    assert scripted_server.request_count == 0


def test_ray_not_installed_is_one_line_saying_how(tmp_path, scripted_server, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, as without the extra
    project = _with_engine(make_project(tmp_path / "p", scripted_server.url), executor="ray")
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "needs Ray, which is not installed" in err and "skynet-optimizer[ray]" in err, err
    assert scripted_server.request_count == 0


@pytest.mark.slow
def test_skynet_optimize_runs_on_worker_processes_with_the_callers_metric(
    tmp_path, scripted_server, monkeypatch
):
    from test_python_api import SEED, TRAIN, VAL, _tables

    import skynet

    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    calls = []

    def named(input, output, expected=None):  # defined here: it reaches the workers by value
        calls.append(1)  # in the worker's copy: the driver's list stays empty
        hit = expected["capital"].lower() in output.lower()
        return float(hit), {"feedback": "right" if hit else f"name {expected['capital']}"}

    tables = _tables(scripted_server.url)
    threads = skynet.optimize(SEED, metric=named, train=TRAIN, val=VAL, user="Country: {country}",
                              store=tmp_path / "threads", **tables)  # fmt: skip
    before = len(calls)
    tables["engine"] = {**tables["engine"], "executor": "processes", "workers": 2}
    workers = skynet.optimize(SEED, metric=named, train=TRAIN, val=VAL, user="Country: {country}",
                              store=tmp_path / "workers", **tables)  # fmt: skip
    assert workers.best == threads.best and workers.best_score == threads.best_score == 1.0
    assert workers.baseline_score == threads.baseline_score
    with RunStore(tmp_path / "threads" / "runs.db", readonly=True) as store:
        evaluated = len(store.evaluations(threads.run_id))
    # Here, only the self-test ran the metric; every evaluation ran it on a worker. (The threads
    # run made the self-test's calls and at least one per evaluation it recorded.)
    assert evaluated > 0 and 0 < len(calls) - before <= before - evaluated


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_a_killed_driver_takes_its_workers_with_it_and_the_run_resumes(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    calm = _calm(tmp_path, scripted_server.url)

    project = _with_engine(
        make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=4),
        executor="processes",
        workers=2,
    )
    driver: subprocess.Popen[bytes] | None = None
    workers: list[int] = []

    def kill_the_driver():
        assert driver is not None
        workers.extend(_children_of(driver.pid))
        os.kill(driver.pid, signal.SIGKILL)

    scripted_server.responder = _kill_at(15, kill_the_driver)
    driver = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert driver.wait(timeout=120) == -signal.SIGKILL
    assert len(workers) >= 2  # the worker processes (and multiprocessing's resource tracker)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in workers):
        time.sleep(0.1)
    assert not [p for p in workers if Path(f"/proc/{p}/stat").exists()]  # none outlives it

    with RunStore(runs_db_path(project), readonly=True) as store:
        run_id = store.list_runs()[-1].id
    scripted_server.responder = task_responder
    assert main(["-C", str(project), "run", "--resume", run_id]) == 0
    capsys.readouterr()
    assert _records(project)[:3] == _records(calm)[:3]


@pytest.mark.slow
def test_a_twin_request_in_flight_on_two_workers_is_sent_once(tmp_path, scripted_server):
    from skynet.evaluation import Evaluation
    from skynet.executors import open_executor
    from skynet.models import configure
    from skynet.project import open_project

    asked = []

    def slow(body):
        asked.append(body["messages"][-1]["content"])
        time.sleep(0.3)
        return task_responder(body)

    scripted_server.responder = slow
    folder = _with_engine(make_project(tmp_path / "p", scripted_server.url), executor="processes",
                          workers=2)  # fmt: skip
    project = open_project(folder)
    models = configure(project.config.models_config(), base_dir=folder)
    evaluation = Evaluation(project.metric, project.artifact.task(models, project.config.artifact))
    executor = open_executor(project, models, evaluation, print)
    try:
        item = project.dataset.val[0]
        seed = dict(project.artifact.components)
        done: list = []
        threads = [
            threading.Thread(target=lambda: done.append(executor.evaluate(seed, item)))
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        executor.close()
    # Both workers evaluated it; one request reached the model, the other waited for its reply.
    assert len(done) == 2 and done[0][0].score == done[1][0].score
    assert len(asked) == 1
    assert sorted(c.cached for _, calls in done for c in calls) == [False, True]


HOSTILE = """import os
import signal
import socket


def run(input):
    # Kill everything in reach: the worker, the driver, the other workers, the model server.
    for pid in range(2, 4096):
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    reached = []
    for port in (22, 6379, 8000):  # the driver's loopback and its services
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            reached.append(port)
        except OSError:
            pass
    return {"total": -1, "reached": reached}
"""


@pytest.mark.slow
def test_a_hostile_code_candidate_on_a_worker_reaches_nothing_outside_its_sandbox(
    tmp_path, scripted_server, capsys
):
    from projects import SUM_METRIC, make_sum_code_project

    from skynet.testing import reply

    fixed = "def run(input):\n    n = input['n']\n    return {'total': n * (n + 1) // 2}\n"
    scripted_server.responder = lambda body: reply(f"```python\n{fixed}```")
    project = make_sum_code_project(
        tmp_path / "p",
        code=HOSTILE,
        metric=SUM_METRIC,
        toml=f"""
        timeout_s = 5

        [engine]
        name = "gepa"
        concurrency = 2
        executor = "processes"
        workers = 2

        [budget]
        max_metric_calls = 30

        [models]
        reflection = "openai/skynet-test"

        [models.endpoints."openai/skynet-test"]
        api_base = "{scripted_server.url}"
        """,
    )
    assert main(["-C", str(project), "run"]) == 0
    said = capsys.readouterr()
    assert "a worker process died" not in said.err  # no worker, and not the driver, was hit
    best = next((project / ".skynet" / "runs").glob("*/best_code.py")).read_text()
    assert best.strip() == fixed.strip()
    with RunStore(runs_db_path(project), readonly=True) as store:
        outputs = [
            o
            for run in store.list_runs()
            for o in (json.dumps(e.output) for e in store.evaluations(run.id))
            if o and "reached" in o
        ]
    assert outputs and all('"reached": []' in o for o in outputs)  # loopback out of its reach
