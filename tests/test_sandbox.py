"""Each attack a hostile code candidate tried on Skynet, as a test: run as Skynet's own user (root
in CI) and as an unprivileged user (the usual way people run Skynet).

Every hostile candidate lives in tests/fixtures/hostile/. Where a test says an attack fails, a
control case shows the same candidate succeeding with `sandbox = "none"`, so the test cannot pass
because the attack was broken.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import unprivileged

from skynet.artifacts.code import CodeArtifact, CodeFailed
from skynet.errors import SandboxUnavailable
from skynet.sandbox import Limits, bounded_json, check_available

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
REPO = Path(__file__).parent.parent
SECRET = "ANSWER-KEY-" + uuid.uuid4().hex


def hostile(name: str) -> str:
    return (HOSTILE / f"{name}.py").read_text()


class Runner:
    """Runs a candidate as one kind of user; returns {"output": ...} or {"failed": message}."""

    def __init__(self, who: str, uid: int, helper: unprivileged.Unprivileged | None) -> None:
        self.who = who
        self.uid = uid
        self.helper = helper

    def run(
        self,
        name: str,
        input: dict[str, Any] | None = None,
        *,
        mode: str = "bwrap",
        hidden: tuple[Path, ...] = (),
        env: dict[str, str] | None = None,
        **limits: Any,
    ) -> dict[str, Any]:
        source = hostile(name)
        if self.helper is not None:
            return self.helper.run(source, input or {}, mode=mode, hidden=hidden, env=env, **limits)
        art = CodeArtifact(source=source, limits=Limits(**limits), sandbox=mode, hidden=hidden)
        saved = dict(os.environ)
        os.environ.update(env or {})
        try:
            return {"output": art.run({"code": source}, input or {})}
        except CodeFailed as exc:
            return {"failed": str(exc)}
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def popen(self, argv: list[str]) -> subprocess.Popen[bytes]:
        """A process of this user's, on the host (a rival, a listener)."""
        if self.helper is not None:
            argv = [
                "setpriv",
                f"--reuid={self.uid}",
                f"--regid={self.uid}",
                "--clear-groups",
                *argv,
            ]
        return subprocess.Popen(argv)


@pytest.fixture(scope="module")
def _helper():
    if unprivileged.available():
        yield None
        return
    helper = unprivileged.Unprivileged(REPO)
    yield helper
    helper.close()


@pytest.fixture(params=["skynet-user", "unprivileged"])
def runner(request, _helper) -> Runner:
    check_available("bwrap")
    if request.param == "unprivileged":
        why = unprivileged.available()
        if why:
            pytest.skip(f"unprivileged case: {why}")
        return Runner("unprivileged", unprivileged.UID, _helper)
    return Runner("skynet-user", os.geteuid(), None)


@pytest.fixture
def project(runner: Runner):
    """A project folder owned by the runner's user, as `skynet init` makes it, with answers."""
    top = Path(tempfile.mkdtemp(prefix="skynet-project-"))
    (top / ".skynet").mkdir()
    (top / "data.jsonl").write_text(f'{{"question": "q1", "answer": "{SECRET}"}}\n')
    (top / "metric.py").write_text(f"# {SECRET}\ndef score(input, output, expected=None): ...\n")
    (top / "skynet.toml").write_text(f"# {SECRET}\n")
    (top / ".skynet" / "runs.db").write_bytes(b"SQLite format 3\x00" + SECRET.encode())
    for path in (top, *top.rglob("*")):
        os.chown(path, runner.uid, runner.uid) if os.geteuid() == 0 else None
        os.chmod(path, 0o700 if path.is_dir() else 0o600)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def _leaked(result: dict[str, Any]) -> bool:
    return SECRET in repr(result)


# -- the candidate sees no project file, data, store, environment ---------------------------
@pytest.mark.slow
def test_the_answers_are_unreadable(runner, project):
    got = runner.run("read_answers", {"data_path": str(project / "data.jsonl")}, wall_s=60)
    assert "output" in got, got
    assert not _leaked(got)


def test_unsandboxed_the_same_candidate_reads_the_answers(runner, project):
    """The control: without bubblewrap the attack works, so the test above means something."""
    got = runner.run("read_answers", {"data_path": str(project / "data.jsonl")}, mode="none")
    assert _leaked(got)


def test_site_packages_is_readable_but_the_editable_project_is_not(runner):
    """Issue 28: the interpreter's site-packages is bound (read-only: installed packages import;
    tests/test_sandbox_packages.py), but the project an editable install points to is not."""
    import sysconfig

    site = os.path.realpath(sysconfig.get_paths(vars={"base": sys.base_prefix})["purelib"])
    assert os.listdir(site), "the test needs a non-empty site-packages"
    source = "import os\ndef run(input):\n    return os.listdir(input['path'])\n"
    got = _inline(runner, source, input={"path": site})
    # Absent altogether in the unprivileged case, which runs /usr/bin/python3.
    assert got == {"output": os.listdir(site)} or "FileNotFoundError" in got.get("failed", "")
    got = _inline(runner, source, input={"path": str(REPO / "skynet")})
    assert "FileNotFoundError" in got.get("failed", ""), got


def _parent_secret(runner: Runner) -> tuple[str, dict[str, str]]:
    """A variable of the process that runs Skynet, as /proc shows it (what an attacker reads),
    and the environment to start that process with."""
    key = f"sk-{SECRET}"
    if runner.helper is not None:
        return key, {"OPENAI_API_KEY": key}
    # In-process, /proc/self/environ holds what pytest started with: pick one of those.
    entries = Path("/proc/self/environ").read_bytes().decode("latin-1").split("\0")
    plain = ("PATH=", "LANG=", "HOME=", "PYTHONHASHSEED=", "PWD=", "SHLVL=", "_=", "TERM=")
    usable = [e for e in entries if "=" in e and len(e) > 12 and not e.startswith(plain)]
    if not usable:
        pytest.skip("pytest's environment holds no variable to look for")
    return usable[0], {}


def test_the_parents_environment_is_unreadable(runner, project):
    secret, env = _parent_secret(runner)
    got = runner.run("read_env", env=env)
    assert "output" in got, got
    assert secret not in got["output"]["env"]


def test_unsandboxed_the_parents_environment_leaks(runner, project):
    secret, env = _parent_secret(runner)
    got = runner.run("read_env", env=env, mode="none")
    assert secret in got["output"]["env"]


def test_the_run_store_cannot_be_rewritten(runner, project):
    store = project / ".skynet" / "runs.db"
    before = hashlib.sha256(store.read_bytes()).hexdigest()
    got = runner.run("rewrite_store", {"store_path": str(store)})
    assert hashlib.sha256(store.read_bytes()).hexdigest() == before
    assert all(w.startswith("refused") for w in got["output"]["writes"]), got


def test_unsandboxed_the_run_store_is_rewritten(runner, project):
    store = project / ".skynet" / "runs.db"
    got = runner.run("rewrite_store", {"store_path": str(store)}, mode="none")
    assert str(store) in got["output"]["writes"]
    assert store.read_bytes().startswith(b"pwned")


# -- nothing outlives an evaluation; no rival can be reached -------------------------------
def _alive(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [pid for pid in found if pid != str(os.getpid())]


def test_no_process_outlives_the_evaluation(runner):
    marker = f"{int(time.time()) % 100000 + 900000}.{uuid.uuid4().int % 10**6}"
    got = runner.run("daemon", {"marker": marker})
    assert got == {"output": {"left": "a daemon"}}
    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(marker) == []


def test_a_killed_skynet_leaves_no_candidate_behind(tmp_path):
    """Skynet itself SIGKILLed mid-evaluation (a crash, the OOM killer): --die-with-parent takes
    the sandbox, and everything in its PID namespace, down with it."""
    marker = f"{int(time.time()) % 100000 + 700000}.{uuid.uuid4().int % 10**6}"
    script = tmp_path / "skynet_like.py"
    script.write_text(
        "from skynet.artifacts.code import CodeArtifact\n"
        "from skynet.sandbox import Limits\n"
        f'src = \'import os\\ndef run(input):\\n    os.execv("/bin/sleep", ["/bin/sleep", "{marker}"])\\n\'\n'
        "CodeArtifact(source=src, limits=Limits(wall_s=300)).run({'code': src}, {})\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        deadline = time.monotonic() + 30
        while not _alive(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _alive(marker), "the candidate never started"
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _alive(marker) == []


@pytest.mark.slow
def test_unsandboxed_a_daemon_would_survive(runner):
    """The control: the same candidate, unsandboxed, leaves its daemon running."""
    marker = f"{int(time.time()) % 100000 + 800000}.{uuid.uuid4().int % 10**6}"
    runner.run("daemon", {"marker": marker}, mode="none")
    try:
        time.sleep(0.3)
        assert _alive(marker) != []
    finally:
        subprocess.run(["pkill", "-9", "-f", marker])


def test_rivals_cannot_be_stopped_or_seen(runner):
    rival = runner.popen(["sleep", "60"])
    try:
        time.sleep(0.1)
        got = runner.run("kill_rivals", {"rival": rival.pid})
        state = Path(f"/proc/{rival.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state != "T", "the rival was stopped"
        assert rival.pid not in got["output"]["stopped"]
        # Only the sandbox's own processes are visible: its init and the candidate.
        assert len(got["output"]["visible"]) <= 3, got["output"]["visible"]
    finally:
        rival.kill()
        rival.wait()


def test_no_connection_leaves_the_sandbox(runner):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    accepted: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            accepted.append(conn.recv(100))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        got = runner.run("network", {"port": listener.getsockname()[1]})
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert accepted == [], accepted
    assert "python" not in got["output"]["reached"]


# -- Skynet itself cannot be hung or ballooned ----------------------------------------------
def test_a_grandchild_holding_stderr_does_not_hang_skynet(runner):
    began = time.monotonic()
    got = runner.run("stderr_holder", wall_s=60)
    assert got == {"output": 42}
    assert time.monotonic() - began < 20  # far below the 60 s wall limit and the 300 s sleep


def test_output_files_cannot_trap_the_parent(runner):
    began = time.monotonic()
    got = runner.run("output_tricks", wall_s=60)
    assert "output" in got, got
    assert time.monotonic() - began < 20


def test_a_connection_flood_on_the_model_socket_keeps_skynet_small():
    """Skynet serves a few model-proxy connections at a time: a candidate holding thousands does
    not make Skynet start thousands of threads, and none is left when the evaluation ends."""
    before = threading.active_count()
    peak = [before]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        got = Runner("skynet-user", os.geteuid(), None).run("socket_flood", wall_s=20)
    finally:
        stop.set()
        watcher.join()
    assert "output" in got, got
    assert peak[0] - before <= 8 + 3, f"{peak[0] - before} threads for {got['output']['held']}"
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_a_big_output_is_refused_unread(runner):
    got = runner.run("big_output", {"mb": 2})
    assert "passed 1,000,000 bytes" in got["failed"]


def test_a_deeply_nested_output_is_refused(runner):
    got = runner.run("deep_output", {"depth": 500})
    assert "nests deeper than 64" in got["failed"]


@pytest.mark.parametrize(
    ("text", "ok"),
    [(b'{"output": [[1]]}', True), (b'"[[[[["', True), (b"[" * 65 + b"]" * 65, False)],
)
def test_bounded_json_counts_nesting_outside_strings(text, ok):
    value, problem = bounded_json(text, 64)
    assert (problem == "") is ok


@pytest.mark.slow
def test_a_stderr_flood_keeps_skynet_small(runner):
    if runner.helper is None:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        got = runner.run("stderr_flood", {"mb": 1024}, wall_s=60)
        grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    else:
        runner.run("stderr_flood", {"mb": 1}, wall_s=60)
        before = runner.helper.last_maxrss_kb
        got = runner.run("stderr_flood", {"mb": 1024}, wall_s=60)
        grew_mb = (runner.helper.last_maxrss_kb - before) / 1024
    assert got == {"output": "flooded"}
    assert grew_mb < 64, f"Skynet grew by {grew_mb:.0f} MB reading a 1 GiB stderr"


def test_no_file_outside_the_scratch_folder_grows(runner):
    watched = [Path("/var/tmp"), Path("/dev/shm"), Path(tempfile.gettempdir())]
    before = {p: set(os.listdir(p)) for p in watched if p.is_dir()}
    got = runner.run("fill_disk", tmpfs_mb=32, max_file_mb=16, wall_s=30)
    written = got["output"]
    # /tmp and /dev/shm hold at most tmpfs_mb each; nothing else is writable.
    assert written["/tmp"] <= 32 << 20 and written["/dev/shm"] <= 32 << 20, written
    assert sum(v for k, v in written.items() if k not in ("/tmp", "/dev/shm")) == 0, written
    for folder, names in before.items():
        new = {n for n in set(os.listdir(folder)) - names if n.startswith(("fill", "one-big"))}
        assert not new, f"{folder} grew: {new}"


def test_one_file_is_held_to_max_file_mb(runner):
    source_limits = {"tmpfs_mb": 64, "max_file_mb": 4, "wall_s": 30}
    got = runner.run("fill_disk", **source_limits)
    # Every 8 MB file is refused (EFBIG), so nothing past 4 MB per file is ever written.
    assert got["output"]["/tmp"] <= 4 << 20, got


@pytest.mark.slow
def test_forked_children_cannot_pass_the_memory_limit_together(runner):
    got = runner.run("fork_memory", {"children": 4, "mb": 300}, memory_mb=512, wall_s=30)
    if "output" in got:
        assert got["output"]["children_that_held_their_memory"] <= 1, got
    else:
        assert "memory" in got["failed"] or "512 MB" in got["failed"], got


@pytest.mark.slow
def test_a_fork_bomb_is_contained_and_cleaned_up(runner):
    got = runner.run("fork_bomb", wall_s=2, max_processes=32)
    assert "failed" in got
    deadline = time.monotonic() + 10
    while _alive("skynet sandbox harness") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive("skynet sandbox harness") == []


def test_the_model_channel_works_for_an_unprivileged_skynet(runner):
    """The proxy's socket is reachable from inside the user namespace (the candidate has no other
    way out). As Skynet's own user, tests/artifacts/test_code.py runs it against a real model
    server; here the unprivileged interpreter has no model layer, so the call echoes."""
    if runner.helper is None:
        pytest.skip("covered with a real loopback model server in tests/artifacts/test_code.py")
    source = "from skynet_sandbox import complete\ndef run(input):\n    return complete('hi')\n"
    got = runner.helper.run(source, {}, echo_model=True)
    assert got == {"output": "echo: hi"}, got


# -- the limits, each a clear candidate error ------------------------------------------------
@pytest.mark.slow
def test_an_infinite_loop_is_killed_at_the_wall_time(runner):
    began = time.monotonic()
    got = _inline(runner, "def run(input):\n    while True:\n        pass\n", wall_s=1)
    assert "longer than 1 s" in got["failed"]
    assert time.monotonic() - began < 10


@pytest.mark.slow
def test_cpu_time_is_limited(runner):
    source = (
        "import threading\n"
        "def spin():\n    while True:\n        pass\n"
        "def run(input):\n    for _ in range(2):\n        threading.Thread(target=spin).start()\n"
        "    spin()\n"
    )
    got = _inline(runner, source, wall_s=20, cpu_s=1)
    assert "CPU time" in got["failed"], got


def test_a_4_gb_allocation_is_contained(runner):
    got = _inline(
        runner, "def run(input):\n    return len(bytearray(4 * 1024 ** 3))\n", memory_mb=256
    )
    assert "MemoryError" in got["failed"]


def _inline(
    runner: Runner, source: str, input: dict[str, Any] | None = None, **limits: Any
) -> dict[str, Any]:
    path = HOSTILE / f"_inline_{uuid.uuid4().hex[:8]}.py"
    path.write_text(source)
    try:
        return runner.run(path.stem, input, **limits)
    finally:
        path.unlink()


# -- where bubblewrap cannot run --------------------------------------------------------------
def test_without_bwrap_code_refuses_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    monkeypatch.setattr("skynet.sandbox._run._probed", {})
    with pytest.raises(SandboxUnavailable) as caught:
        check_available("bwrap")
    message = str(caught.value)
    assert "apt-get install bubblewrap" in message
    assert 'sandbox = "none"' in message
    check_available("none")  # the explicit opt-out still works


# -- end to end: the answer-reading candidate cannot beat an honest one ---------------------
@pytest.mark.slow
def test_a_candidate_reading_the_answers_gains_nothing_end_to_end(tmp_path, capsys):
    """`skynet eval` of examples/code_speed with a candidate that returns the answers it reads
    from the project's data.jsonl: sandboxed it scores like a wrong program; the same candidate
    unsandboxed scores near 1, and that run's report says "unsandboxed"."""
    from skynet.cli import main

    project = tmp_path / "p"
    shutil.copytree(REPO / "examples" / "code_speed", project)
    cheat = project / "cheat.py"
    cheat.write_text(
        "import json\n"
        "def run(input):\n"
        f"    for line in open({str(project / 'data.jsonl')!r}):\n"
        "        row = json.loads(line)\n"
        "        if row['n'] == input['n']:\n"
        "            return {'count': row['count']}\n"
    )
    honest = project / "code.py"

    def mean(candidate: Path, *extra: str) -> float:
        capsys.readouterr()
        assert main(["eval", str(project), "--candidate", str(candidate), *extra]) == 0
        out = capsys.readouterr().out
        line = next(x for x in out.splitlines() if " mean score " in x)
        return float(line.split(" mean score ")[1].split()[0])

    sandboxed = mean(cheat, "--split", "val")
    honest_score = mean(honest, "--split", "val")
    unsandboxed = mean(cheat, "--split", "val", "--set", "artifact.sandbox=none")
    assert sandboxed < honest_score < unsandboxed, (sandboxed, honest_score, unsandboxed)
    assert main(["-C", str(project), "show"]) == 0
    assert "unsandboxed" in capsys.readouterr().out
