"""One writer per project: while a run runs, a second run, resume, eval or rescore is refused with
one line naming the run and its process id, sends no request and adds no row; show, runs and a
dry run keep working; a run killed with SIGKILL leaves no lock; nothing is paid twice."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
from projects import make_project, task_responder

from skynet.cli import main
from skynet.errors import ConfigError
from skynet.runs import RunStore
from skynet.runs.lock import ProjectBusy, lock_path, one_writer
from skynet.testing.server import ScriptedServer


class Recorder:
    """The scripted model, slowed down; it keeps every request body, and kills `process` on
    the request numbered `kill_at` (mid-request: that reply never arrives)."""

    def __init__(self, latency_s: float = 0.2, first_latency_s: float | None = None) -> None:
        self.latency_s = latency_s  # a run of ~37 calls, one at a time: about 7 s
        self.first_latency_s = first_latency_s
        self.bodies: list[str] = []
        self.process: subprocess.Popen[bytes] | None = None
        self.kill_at: int | None = None
        self._lock = threading.Lock()

    def __call__(self, body):
        with self._lock:
            self.bodies.append(
                hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            )
            if self.kill_at == len(self.bodies) and self.process is not None:
                os.kill(self.process.pid, signal.SIGKILL)
            first = len(self.bodies) == 1 and self.first_latency_s is not None
        latency = self.first_latency_s if first else self.latency_s
        return dataclasses.replace(task_responder(body), latency_s=latency)

    def wait_for(self, n: int, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.bodies) < n:
            assert time.monotonic() < deadline, f"the run sent {len(self.bodies)} of {n} requests"
            time.sleep(0.02)


def _elsewhere(url: str) -> list[str]:
    # A refused writer that went ahead anyway would call this server, not the run's.
    return ["--set", f'models.endpoints."openai/skynet-test".api_base={url}']


def _refusal(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.slow
def test_a_second_writer_is_refused_while_a_run_runs_and_a_killed_run_leaves_no_lock(
    tmp_path, scripted_server, capsys
):
    model = Recorder()
    scripted_server.responder = model
    project = make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=1)
    first = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    model.process = first
    try:
        model.wait_for(9)  # the seed on the 8 val items, recorded: the run is well under way
        store = RunStore(project / ".skynet" / "runs.db")
        (running,) = store.list_runs()
        assert running.status == "running"

        with ScriptedServer() as spy:
            spy.responder = task_responder
            for argv, doing in [
                (["run"], "is running"),
                (["run", "--resume", running.id], "is running"),
                (["eval", "--candidate", "seed", "--split", "val"], "is running"),
            ]:
                assert main(["-C", str(project), *argv, *_elsewhere(spy.url)]) == 2, argv
                line = _refusal(capsys)
                assert f"run {running.id} {doing} in process {first.pid}" in line, line
                assert line.startswith("skynet: error: ") and f"kill {first.pid}" in line
            assert main(["-C", str(project), "rescore", "--run", running.id]) == 2
            assert f"run {running.id} is running in process {first.pid}" in _refusal(capsys)
            assert spy.request_count == 0  # the refused writers sent nothing
        assert [r.id for r in store.list_runs()] == [running.id]  # and recorded no run

        # Readers keep working meanwhile; a dry run's sample is served by what the run paid.
        assert main(["-C", str(project), "runs"]) == 0
        listed = capsys.readouterr().out
        assert f"{running.id}   running" in listed and "unfinished" not in listed, listed
        assert main(["-C", str(project), "show", running.id]) == 0
        assert main(["-C", str(project), "run", "--dry-run"]) == 0
        assert "dry run: engine gepa" in capsys.readouterr().out

        model.kill_at = len(model.bodies) + 1
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert store.get_run(running.id).status == "running"  # killed: no chance to say otherwise
    # ... but no process writes it: the listing and the report say so, and how to go on.
    capsys.readouterr()
    assert main(["-C", str(project), "runs"]) == 0
    listed = capsys.readouterr().out
    assert f"{running.id}   unfinished" in listed, listed
    assert (
        f"no process writes it (it was killed, or its process exited); `skynet run --resume {running.id}`"
        in listed
    )
    assert main(["-C", str(project), "show", running.id]) == 0
    assert "no process writes it" in capsys.readouterr().out
    killed = model.bodies[model.kill_at - 1]
    model.latency_s = 0.01

    # The kernel dropped the lock with the process: the resume proceeds and finishes.
    assert main(["-C", str(project), "run", "--resume", running.id]) == 0
    assert store.get_run(running.id).status == "finished"
    repeated = {body: n for body, n in Counter(model.bodies).items() if n > 1}
    assert repeated == {killed: 2}  # only the request whose reply the kill swallowed
    paid = [c for c in store.calls(running.id) if c.ok and not c.cached]
    assert len(paid) == len(model.bodies) - 1  # every recorded call paid once, by the run alone


@pytest.mark.slow
def test_a_dry_run_beside_another_pays_no_sample_call_twice(tmp_path, scripted_server, capsys):
    # A dry run makes real calls. One started while another process has the same call in flight
    # waits for it and is served from the cache, instead of sending it again.
    model = Recorder(latency_s=0.1, first_latency_s=2.0)
    scripted_server.responder = model
    project = make_project(tmp_path / "p", scripted_server.url)
    dry = ["-C", str(project), "run", "--dry-run"]
    other = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", *dry], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        import litellm  # noqa: F401 — loaded here while the other process loads it too

        model.wait_for(1)
        assert len(model.bodies) == 1  # its first sample call is in flight, 2 s long
        assert main(dry) == 0
        assert "from 3 real call(s)" in capsys.readouterr().out
        out, err = other.communicate(timeout=60)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert other.returncode == 0, err
    assert b"from 3 real call(s)" in out
    assert len(model.bodies) == 3 == len(set(model.bodies))  # 6 when each dry run pays its own


def test_a_lock_file_that_cannot_be_made_is_one_line_before_any_request(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    lock_path(project / ".skynet").mkdir(
        parents=True
    )  # root writes anywhere: a folder in its place
    assert main(["-C", str(project), "run"]) == 2
    line = _refusal(capsys)
    assert "run.lock: cannot open the run lock" in line, line
    assert scripted_server.request_count == 0
    assert not (project / ".skynet" / "runs.db").exists()


def _refused(store_dir, **holder) -> str:
    with pytest.raises(ProjectBusy) as refused, one_writer(store_dir, **holder):
        pass
    return str(refused.value)


def test_the_lock_is_held_for_the_block_and_names_its_holder(tmp_path):
    pid = os.getpid()
    with one_writer(tmp_path, command="run") as writer:
        assert _refused(tmp_path, command="resume", run_id="r1").startswith(
            f"a run is starting in process {pid} "
        )
        writer.names("r1")
        assert _refused(tmp_path, command="eval").startswith(f"run r1 is running in process {pid} ")
    with one_writer(tmp_path, command="eval"):  # released at the block's end
        assert _refused(tmp_path, command="run").startswith(
            f"an evaluation is starting in process {pid} "
        )
    assert lock_path(tmp_path).read_bytes().strip() == b""  # no record left behind


def test_a_lock_folder_that_is_a_file_is_a_config_error(tmp_path):
    (tmp_path / ".skynet").write_text("not a folder")
    with (
        pytest.raises(ConfigError, match=r"\.skynet is a file, not a folder.*move it aside"),
        one_writer(tmp_path / ".skynet", command="run"),
    ):
        pass
