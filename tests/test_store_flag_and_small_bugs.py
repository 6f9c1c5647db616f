"""Issue 28: a run that skynet.optimize(store=PATH) recorded outside .skynet is read by `skynet
runs/show/view/export --store PATH`, and a --store that holds no runs is one line; and three small
bugs a Python user met: the live progress line ran into the next message, an aborted Python run
advised `skynet run --resume`, and a 2-section prompt seed under dspy-gepa was blamed on "None"."""

from __future__ import annotations

import http.client
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from projects import never_perfect, task_responder
from runs.test_resume_outage import Outage
from test_bad_inputs import one_error_line
from test_python_api import SEED, TRAIN, VAL, _tables, score

import skynet
from skynet.api import _NotebookLine
from skynet.cli import main
from skynet.runs import RunStore
from skynet.testing.server import ScriptedServer

COMMON = dict(metric=score, train=TRAIN, val=VAL, user="Country: {country}")


@pytest.fixture(scope="module")
def python_store(tmp_path_factory):
    """A finished run that skynet.optimize recorded in a store of its own, <root>/s, made from
    another folder (<root>/elsewhere) than the ones the CLI is started in below."""
    root = tmp_path_factory.mktemp("store")
    (root / "elsewhere").mkdir()
    server = ScriptedServer().start()
    server.responder = task_responder
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(root / "elsewhere")
            result = skynet.optimize(
                SEED, **COMMON, store=root / "s", out=io.StringIO(), **_tables(server.url)
            )
    finally:
        server.stop()
    assert result.status == "finished" and result.store == root / "s"
    return root, result.run_id


# -- (a) --store ----------------------------------------------------------------------------


# Each row: the argv (S: the store, R: the run id, T: the test's own folder), and a pattern of
# what it prints.
READS = [
    pytest.param(["runs", "--store", "S"], r"{run}\s+finished\s+gepa", id="runs"),
    pytest.param(["show", "--store", "S"], r"Run {run}\s+finished", id="show-latest"),
    pytest.param(["show", "R", "--store", "S"], r"Run {run}\s+finished", id="show-run"),
    pytest.param(["show", "R", "--store", "S", "--json"], r'"run_id": "{run}"', id="show-json"),
    pytest.param(
        ["show", "R", "--store", "S", "--html", "T/report.html"], r"wrote .*report\.html", id="html"
    ),
    pytest.param(["runs", "--store", "S/runs.db"], r"{run}\s+finished", id="runs-db-file-given"),
    # -C DIR: a relative --store is relative to DIR, as the project folder is.
    pytest.param(["-C", "ROOT", "runs", "--store", "s"], r"{run}\s+finished", id="relative-to-C"),
]


@pytest.mark.parametrize(("argv", "printed"), READS)
def test_store_flag_reads_a_run_optimize_stored_elsewhere(
    python_store, tmp_path, monkeypatch, capsys, argv, printed
):
    root, run = python_store
    monkeypatch.chdir(tmp_path)  # a folder with no .skynet: the runs are found by --store only
    names = {"S": str(root / "s"), "R": run, "T": str(tmp_path), "ROOT": str(root)}
    argv = [re.sub(r"^(S|R|T|ROOT)\b", lambda m: names[m.group(1)], a) for a in argv]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(printed.format(run=run), out), out
    if "--json" in argv:
        assert json.loads(out)["status"] == "finished"
    if "--html" in argv:
        assert run in (tmp_path / "report.html").read_text()
    assert not (tmp_path / ".skynet").exists()  # nothing written where it was started


def test_export_with_store_reads_the_run_before_asking_for_a_tracker(
    python_store, tmp_path, monkeypatch, capsys
):
    root, run = python_store
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # An unknown run is refused from the store --store names ...
    assert main(["export", "mlflow", "nope", "--store", str(root / "s")]) == 2
    assert "nope" in one_error_line(capsys)
    # ... the recorded one is found, and what is left to say is where to send it.
    assert main(["export", "mlflow", run, "--store", str(root / "s")]) == 2
    assert "no MLflow tracking URI" in one_error_line(capsys)


@pytest.mark.slow
def test_view_with_store_serves_the_run(python_store, tmp_path):
    root, run = python_store
    proc = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(tmp_path), "view", run, "--port", "0"]
        + ["--store", str(root / "s")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        found = re.match(r"Skynet viewer: (http://127\.0\.0\.1:\d+)(/run/\S+)\?token=(\S+)", line)
        assert found is not None, line + proc.stderr.read() if proc.poll() is not None else line
        conn = http.client.HTTPConnection(found.group(1).removeprefix("http://"), timeout=10)
        conn.request("GET", f"{found.group(2)}?token={found.group(3)}")
        entered = conn.getresponse()
        entered.read()
        cookie = entered.getheader("Set-Cookie").split(";")[0]
        conn.request("GET", f"/run/{run}", headers={"Cookie": cookie})
        page = conn.getresponse()
        assert page.status == 200 and run in page.read().decode()
        proc.send_signal(2)  # Ctrl-C
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err


COMMANDS = {
    "runs": ["runs"],
    "show": ["show"],
    "view": ["view", "--port", "0"],  # refused before it serves anything
    "export": ["export", "mlflow", "--tracking-uri", "sqlite:///never.db"],
}
BAD = {
    "missing": ("nowhere", "no such folder"),
    "a-file": ("file.txt", "not a folder"),
    "no-runs-db": ("empty", "no runs.db here"),
}


@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
def test_a_store_without_runs_is_one_line(tmp_path, monkeypatch, capsys, command, bad):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("not a store")
    (tmp_path / "empty").mkdir()
    given, why = BAD[bad]
    assert main([*COMMANDS[command], "--store", given]) == 2
    line = one_error_line(capsys)
    assert f"--store {given}: {tmp_path / given}: {why}" in line
    assert "give --store the folder skynet.optimize(store=...) recorded into" in line
    assert not (tmp_path / "never.db").exists() and not (tmp_path / ".skynet").exists()


@pytest.mark.parametrize(
    ("command", "call"),
    [
        pytest.param("rescore", "skynet.rescore(", id="rescore"),
        pytest.param("eval", "skynet.evaluate(", id="eval"),
    ],
)
def test_rescore_and_eval_with_store_say_the_python_call(
    python_store, tmp_path, monkeypatch, capsys, command, call
):
    root, run = python_store
    monkeypatch.chdir(tmp_path)  # no skynet.toml: the run's metric and rows are in Python
    assert main([command, "--store", str(root / "s")]) == 2
    line = one_error_line(capsys)
    assert f"run {run} was made by skynet.optimize()" in line
    assert call in line and f'store="{root / "s"}"' in line


def test_a_project_command_refuses_another_store(python_store, tmp_path, capsys):
    root, _ = python_store
    assert main(["-C", str(tmp_path), "init"]) == 0
    capsys.readouterr()
    assert main(["-C", str(tmp_path), "rescore", "--store", str(root / "s")]) == 2
    line = one_error_line(capsys)
    assert f"records its runs in {tmp_path / '.skynet'}" in line and "leave --store out" in line


def test_an_unfinished_python_run_read_by_store_is_resumed_from_python(
    python_store, tmp_path, capsys
):
    root, run = python_store
    store = tmp_path / "copy"
    shutil.copytree(root / "s", store, ignore=shutil.ignore_patterns("*.lock"))
    with RunStore(store / "runs.db") as db:
        db.set_status(run, "running")  # as a killed process leaves it: no writer holds it
    assert main(["runs", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert f'`skynet.resume("{run}", seed, metric=score' in out and f'store="{store}"' in out
    assert "skynet run --resume" not in out


# -- (b) small bugs -------------------------------------------------------------------------


class _Terminal(io.StringIO):
    """A text stream that says it is a terminal: the progress line is rewritten in place."""

    def isatty(self) -> bool:
        return True


@pytest.mark.slow
@pytest.mark.parametrize(
    "make_out",
    [
        pytest.param(lambda buf: _Terminal(), id="terminal"),
        pytest.param(_NotebookLine, id="notebook"),
    ],
)
def test_a_message_during_a_run_starts_on_its_own_line(
    tmp_path, scripted_server, monkeypatch, make_out
):
    # never_perfect: the proposals stop improving, so auto's early stop speaks mid-run.
    scripted_server.responder = never_perfect
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    out = make_out(buf)
    tables = _tables(scripted_server.url, budget=200)
    tables["engine"] = {"name": "auto", "concurrency": 2}
    skynet.optimize(SEED, **COMMON, out=out, **tables)
    text = (out if isinstance(out, _Terminal) else buf).getvalue()
    # The message auto's early stop says mid-run, on a line of its own; the progress line's
    # text is never followed by another message on its line.
    assert re.search(r"(?m)^auto: no better val score in \d+ proposals", text), text
    for line in text.split("\n"):
        for shown in line.split("\r"):  # what each rewrite of the line shows
            shown = shown.removeprefix("\033[K")
            if re.search(r"metric calls \d+/200", shown):
                assert re.fullmatch(r"metric calls \d+/200 · best val [^:;]*", shown), line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store", "shown"),
    [
        pytest.param("s", "--store", id="own-store"),
        pytest.param(".skynet", "", id="default-store"),
    ],
)
def test_an_aborted_python_run_advises_skynet_resume(
    tmp_path, scripted_server, monkeypatch, store, shown
):
    scripted_server.responder = Outage(after=12)  # the model goes down mid-run: it aborts
    monkeypatch.chdir(tmp_path)
    with pytest.raises(skynet.RunAborted) as aborted:
        skynet.optimize(
            SEED, **COMMON, store=store, out=io.StringIO(), **_tables(scripted_server.url)
        )
    message = str(aborted.value)
    (run,) = re.findall(r'skynet\.resume\("([^"]+)"', message)
    assert f'store="{tmp_path / store}"' in message
    assert "skynet run --resume" not in message
    show = f"`skynet show {run}" + (f" --store {tmp_path / store}`" if shown else "`")
    assert show in message


def _two_section_file(tmp_path: Path) -> Path:
    path = tmp_path / "seed.md"
    path.write_text("=== intro ===\nYou know geography.\n=== task ===\nTell the user about it.\n")
    return path


@pytest.mark.parametrize(
    "seed",
    [
        pytest.param(lambda tmp: {"intro": "You know geography.", "task": SEED}, id="dict"),
        pytest.param(_two_section_file, id="prompt-file-with-user"),
    ],
)
def test_a_two_section_seed_under_dspy_gepa_names_seed(
    tmp_path, scripted_server, monkeypatch, seed
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    tables = {**_tables(scripted_server.url), "engine": {"name": "dspy-gepa"}}
    with pytest.raises(skynet.ConfigError) as refused:
        skynet.optimize(seed(tmp_path), **COMMON, out=io.StringIO(), **tables)
    message = str(refused.value)
    assert message.startswith("skynet.optimize(): seed=: a prompt with 2 sections"), message
    assert 'engine={"name": "gepa"}' in message and "None" not in message
