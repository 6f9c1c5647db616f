"""Bad inputs through the `skynet` command, third sweep (issue 27): `init` into a file or a
read-only folder, a seed SQLite cannot hold, a damaged run record, `show --html` onto nothing or
onto the run store, readers while a run holds the write lock, and a wall clock stepped back.
Each refusal is one `skynet: error:` line, exit 2, and leaves what runs.db recorded as it was."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from projects import make_project, task_responder
from test_bad_inputs import one_error_line

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.report import HTML_HEAD
from skynet.testing import ScriptedServer

BIG = 2**70  # past SQLite's 64-bit INTEGER


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    server = ScriptedServer(responder=task_responder).start()
    try:
        yield server
    finally:
        server.stop()


def _close_models() -> None:
    """The run's model session: not left to the next test."""
    from skynet.models import client

    if client._global is not None:
        client._global.close()
        client._global = None


@pytest.fixture(scope="module")
def recorded_project(server: ScriptedServer, tmp_path_factory) -> Path:
    """A project with two finished runs, made once for the module."""
    project = make_project(tmp_path_factory.mktemp("recorded") / "p", server.url, budget=20)
    for _ in range(2):
        assert main(["-C", str(project), "run"]) == 0
        _close_models()
    return project


@pytest.fixture
def project(recorded_project: Path, tmp_path: Path) -> Path:
    """A copy of the recorded project, its runs included, for one test to break."""
    copy = tmp_path / "p"
    shutil.copytree(recorded_project, copy)
    return copy


def store_of(project: Path) -> Path:
    return project / ".skynet" / "runs.db"


def kept(project: Path) -> tuple:
    """What a refusal must leave alone: every run (a damaged one too), its evaluations and
    model calls."""
    with RunStore(store_of(project), readonly=True) as store:
        runs = store.list_runs(damaged=True)
        return (
            runs,
            {r.id: len(store.evaluations(r.id)) for r in runs},
            {r.id: len(store.calls(r.id)) for r in runs},
        )


def run_ids(project: Path) -> list[str]:
    """The runs, the last recorded first."""
    with RunStore(store_of(project), readonly=True) as store:
        return [r.id for r in store.list_runs(damaged=True)]


def sql(project: Path, statement: str, params: tuple = ()) -> None:
    """Write a row as a damaged file or a stepped clock would have left it (no API writes
    those on purpose)."""
    db = sqlite3.connect(store_of(project))
    try:
        db.execute(statement, params)
        db.commit()
    finally:
        db.close()


# -- 1. skynet init into a file or a read-only folder ---------------------------------------

_MAIN = "import sys; from skynet.cli import main; sys.exit(main(sys.argv[1:]))"
# A private mount namespace in which `folder` is mounted read-only (as root, no file mode makes
# a folder unwritable); the command then runs there.
_READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && shift && exec "$@"'


def _read_only_works(folder: Path) -> str:
    """ "" when a read-only mount can be made here; else why not."""
    if shutil.which("unshare") is None:
        return "no unshare(1) to make a private mount namespace"
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", _READ_ONLY, "sh", str(folder), "true"],
        capture_output=True,
        text=True,
    )
    return "" if probe.returncode == 0 else f"cannot mount read-only: {probe.stderr.strip()}"


def a_file(tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("mine\n")
    return tmp / "notes.txt"


def under_a_file(tmp: Path) -> Path:
    return a_file(tmp) / "p"


def read_only_folder(tmp: Path) -> Path:
    (tmp / "ro").mkdir()
    return tmp / "ro"


def new_folder_in_read_only(tmp: Path) -> Path:
    return read_only_folder(tmp) / "p"


# (case, the DIR given to init, read-only mount of tmp/ro, what the one line must say)
INITS = [
    ("an existing file", a_file, False, ["notes.txt: is a file, not a folder", "skynet init"]),
    ("below a file", under_a_file, False, ["cannot write the starter project", "Not a directory"]),
    (
        "a read-only folder",
        read_only_folder,
        True,
        ["ro: cannot write the starter project there (Read-only file system)", "can write to"],
    ),
    (
        "a new folder in a read-only one",
        new_folder_in_read_only,
        True,
        ["cannot write the starter project there (Read-only file system)"],
    ),
]


@pytest.mark.parametrize(("case", "make", "read_only", "needles"), INITS, ids=[c[0] for c in INITS])
def test_init_where_it_cannot_write_is_one_line(tmp_path, capsys, case, make, read_only, needles):
    target = make(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    if read_only:
        why = _read_only_works(tmp_path / "ro")
        if why:
            pytest.skip(why)
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", _READ_ONLY, "sh", str(tmp_path / "ro")]
            + [sys.executable, "-c", _MAIN, "init", str(target)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        rc, err = done.returncode, done.stderr
        lines = [line for line in err.splitlines() if line.strip()]
        assert "Traceback" not in err and len(lines) == 1, err
        line = lines[0]
        assert line.startswith("skynet: error: ")
    else:
        capsys.readouterr()
        rc = main(["init", str(target)])
        line = one_error_line(capsys)
    assert rc == 2
    assert str(target) in line
    for needle in needles:
        assert needle in line
    # Nothing written, nothing changed.
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


# -- 2. a seed SQLite cannot hold ------------------------------------------------------------


def seed_in_toml(project: Path) -> list[str]:
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace('name = "gepa"', f'name = "gepa"\nseed = {BIG}'))
    return []


# (case, the flags (or a function that edits the project and returns them), what the line says)
SEEDS = [
    ("--seed 2**70", ["--seed", str(BIG)], [f"--seed {BIG}: the seed {BIG} is outside"]),
    ("--seed -2**63-1", ["--seed", str(-(2**63) - 1)], [f"--seed {-(2**63) - 1}: the seed"]),
    ("--seed 2**63", ["--seed", str(2**63)], [f"--seed {2**63}: the seed {2**63} is outside"]),
    ("--set engine.seed", ["--set", f"engine.seed={BIG}"], [f"--set engine.seed={BIG}: the seed"]),
    ("[engine] seed", seed_in_toml, [f"skynet.toml: [engine] seed: the seed {BIG} is outside"]),
    ("--resume --seed", ["--seed", str(BIG), "--resume", "LAST"], [f"--seed {BIG}: the seed"]),
]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "flags", "needles"), SEEDS, ids=[c[0] for c in SEEDS])
def test_a_seed_sqlite_cannot_hold_is_refused(project, capsys, case, flags, needles):
    before = kept(project)
    flags = (
        flags(project)
        if callable(flags)
        else [run_ids(project)[0] if f == "LAST" else f for f in flags]
    )
    capsys.readouterr()
    assert main(["-C", str(project), "run", *flags]) == 2
    line = one_error_line(capsys)
    for needle in needles:
        assert needle in line
    assert "-9223372036854775808 to 9223372036854775807" in line
    assert kept(project) == before  # no run was started


def test_the_largest_seed_sqlite_holds_is_recorded(project, capsys):
    before = run_ids(project)
    assert main(["-C", str(project), "run", "--seed", str(2**63 - 1)]) == 0
    _close_models()
    assert "Traceback" not in capsys.readouterr().err
    with RunStore(store_of(project), readonly=True) as store:
        new = store.latest_run()
    assert new is not None and new.id not in before and new.seed == 2**63 - 1


def test_the_store_refuses_a_seed_it_cannot_hold(tmp_path):
    from skynet.errors import ConfigError

    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(ConfigError, match=f"engine.seed = {BIG} is outside"):
            store.create_run(
                config={},
                dataset_hash="d",
                metric_hash="m",
                seed=BIG,
                engine="gepa",
                budget={},
                versions={},
            )
        assert store.list_runs() == []


# -- 3. a run whose stored record is not JSON -----------------------------------------------

# (case, the column, the value written over it, what the line says of it)
DAMAGED = [
    ("config not JSON", "config", "{not json", "its stored config is not JSON ("),
    ("notes not an object", "notes", "[1, 2]", "its stored notes is not a JSON object"),
    ("budget not UTF-8", "budget", b"\xff\xfe", "its stored budget is not JSON ("),
]


@pytest.mark.parametrize(("case", "column", "value", "said"), DAMAGED, ids=[c[0] for c in DAMAGED])
def test_a_damaged_run_record_is_named_and_the_others_stay_visible(
    project, capsys, case, column, value, said
):
    last, first = run_ids(project)
    sql(project, f"UPDATE runs SET {column} = ? WHERE id = ?", (value, first))
    before = kept(project)
    capsys.readouterr()

    assert main(["-C", str(project), "runs"]) == 0
    out, err = capsys.readouterr()
    listed = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:]}
    assert listed == {last: "finished", first: "damaged"}
    assert "Traceback" not in err
    (warning,) = err.splitlines()
    assert warning.startswith(
        f"skynet: warning: {store_of(project)}: the record of run {first} is damaged: {said}"
    )
    assert warning.endswith("; the other runs are whole")

    assert main(["-C", str(project), "show", first]) == 2
    line = one_error_line(capsys)
    assert f"the record of run {first} is damaged: {said}" in line
    assert "`skynet runs` lists them" in line

    assert main(["-C", str(project), "show", last]) == 0  # the other run still reports
    assert f"Run {last}  finished" in capsys.readouterr().out
    assert kept(project) == before


# -- 4, 5. show --html onto nothing, onto the store, onto a file Skynet did not write --------


def path_to(name: str) -> Callable[[Path], Path]:
    return lambda project: project / name


def a_sqlite_file(project: Path) -> Path:
    other = project / "notes.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    return other


def a_link_to_the_store(project: Path) -> Path:
    (project / "report.html").symlink_to(store_of(project))
    return project / "report.html"


def a_text_file(project: Path) -> Path:
    (project / "notes.txt").write_text("mine\n")
    return project / "notes.txt"


def a_page_skynet_wrote(project: Path) -> Path:
    assert main(["-C", str(project), "show", "--html", str(project / "report.html")]) == 0
    return project / "report.html"


STORE_NEEDLES = ["a database Skynet keeps its records in", "(even with --force)"]
# (case, the --html path, the flags after it, exit code, what the line says, or None for 0)
HTMLS = [
    ("empty", lambda project: "", [], ["--html '': an empty path", "--html report.html"]),
    ("runs.db", path_to(".skynet/runs.db"), [], STORE_NEEDLES),
    ("runs.db --force", path_to(".skynet/runs.db"), ["--force"], STORE_NEEDLES),
    (
        "runs.db-wal --force",
        path_to(".skynet/runs.db-wal"),
        ["--force"],
        ["is a file of a database"],
    ),
    ("runs.db-shm", path_to(".skynet/runs.db-shm"), [], ["is a file of a database"]),
    ("cache.db not made yet", path_to(".skynet/cache.db"), [], STORE_NEEDLES),
    ("another SQLite file", a_sqlite_file, ["--force"], STORE_NEEDLES),
    ("a link to runs.db", a_link_to_the_store, ["--force"], STORE_NEEDLES),
    ("two runs onto runs.db", path_to(".skynet/runs.db"), ["TWO"], STORE_NEEDLES),
    ("a text file", a_text_file, [], ["not a page Skynet wrote", "add --force to overwrite it"]),
    ("a text file --force", a_text_file, ["--force"], None),
    ("a page Skynet wrote", a_page_skynet_wrote, [], None),
]


@pytest.mark.parametrize(("case", "where", "flags", "needles"), HTMLS, ids=[c[0] for c in HTMLS])
def test_show_html_never_destroys_a_file(project, capsys, case, where, flags, needles):
    target = where(project)
    # The files of .skynet, but the -shm: SQLite's shared memory, which every reader touches.
    files = [
        p for p in (project / ".skynet").iterdir() if p.is_file() and not p.name.endswith("-shm")
    ]
    if target and Path(target).is_file() and not target.name.endswith("-shm"):
        files.append(Path(target))
    before_bytes = {p: p.read_bytes() for p in files}
    before = kept(project)
    runs = run_ids(project) if "TWO" in flags else []
    flags = [f for f in flags if f != "TWO"]
    capsys.readouterr()
    rc = main(["-C", str(project), "show", *runs, "--html", str(target), *flags])
    if needles is None:
        assert rc == 0
        assert capsys.readouterr().out.rstrip().endswith(f"wrote {target}")
        assert Path(target).read_text().startswith(HTML_HEAD)
    else:
        assert rc == 2
        line = one_error_line(capsys)
        assert f"--html {target}" in line
        for needle in needles:
            assert needle in line
        assert {p: p.read_bytes() for p in files} == before_bytes  # nothing written
        if target and Path(target).is_file():  # not made, and not overwritten with a page
            assert not Path(target).read_bytes().startswith(b"<!DOCTYPE")
    assert kept(project) == before


# -- 6. readers while another process holds the write lock ----------------------------------

HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("UPDATE runs SET notes = notes")
print("holding", flush=True)
sys.stdin.read()
db.execute("COMMIT")
"""

# (case, the command): each reads runs.db and must answer while a run holds its write lock.
READERS = [
    ("runs", ["runs"]),
    ("show", ["show"]),
    ("show --json", ["show", "--json"]),
    ("show two runs", ["show", "FIRST", "LAST"]),
]


@pytest.mark.parametrize(("case", "command"), READERS, ids=[c[0] for c in READERS])
def test_readers_answer_while_a_writer_holds_the_store(project, capsys, case, command):
    last, first = run_ids(project)
    command = [{"FIRST": first, "LAST": last}.get(c, c) for c in command]
    before = kept(project)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store_of(project))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        capsys.readouterr()
        began = time.monotonic()
        assert main(["-C", str(project), *command]) == 0
        took = time.monotonic() - began
        out, err = capsys.readouterr()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(timeout=30) == 0  # its transaction was never disturbed
    assert err == ""
    assert last in out
    assert took < 10  # the store's busy timeout is 30 s: a reader never waited on the lock
    assert kept(project) == before


def test_a_store_from_an_older_skynet_is_migrated_then_read(tmp_path, capsys):
    fixture = Path(__file__).parent / "fixtures" / "runs_v1.db"
    (tmp_path / ".skynet").mkdir()
    shutil.copy(fixture, tmp_path / ".skynet" / "runs.db")
    assert main(["-C", str(tmp_path), "runs"]) == 0
    assert "20260101-120000-0a1b   finished" in capsys.readouterr().out
    with RunStore(tmp_path / ".skynet" / "runs.db", readonly=True) as store:
        assert len(store.migrations()) > 1  # migrated, and now opened read-only


# -- 7. a wall clock stepped back -------------------------------------------------------------


def test_a_clock_stepped_back_mid_run_keeps_the_wall_time(project, capsys, monkeypatch):
    from skynet.runs import store as store_module

    # Every time recorded after the run is created comes from a clock an hour behind.
    def behind() -> str:
        stepped = datetime.now(timezone.utc) - timedelta(hours=1)
        return stepped.isoformat(timespec="milliseconds")

    monkeypatch.setattr(store_module, "_now", behind)
    began = time.monotonic()
    assert main(["-C", str(project), "run"]) == 0
    took = time.monotonic() - began
    _close_models()
    out = capsys.readouterr().out
    with RunStore(store_of(project), readonly=True) as store:
        run = store.latest_run()
    assert run is not None and run.finished is not None and run.finished < run.created
    assert run.wall_seconds is not None and 0 < run.wall_seconds <= took
    wall = out.split("wall time ", 1)[1].split()[0]
    assert not wall.startswith("-") and wall.endswith("s"), wall


def _step_back(project: Path, run_id: str, hours: float, *, finished: bool) -> None:
    with RunStore(store_of(project), readonly=True) as store:
        created = datetime.fromisoformat(store.get_run(run_id).created)
    when = (created - timedelta(hours=hours)).isoformat(timespec="milliseconds")
    column = "finished" if finished else "created"
    sql(project, f"UPDATE runs SET {column} = ? WHERE id = ?", (when, run_id))


def test_latest_is_the_run_recorded_last_whatever_its_time(project, capsys):
    last, first = run_ids(project)
    _step_back(project, last, 2, finished=False)  # its clock said it began before the first
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 0
    assert capsys.readouterr().out.startswith(f"Run {last} ")
    assert main(["-C", str(project), "runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [last, first]


# (case, what is done to the record, what `wall time` shows)
WALLS = [
    ("measured", None, None),
    ("resumed, clock went back", "back", "-"),
]


@pytest.mark.parametrize(("case", "act", "shown"), WALLS, ids=[c[0] for c in WALLS])
def test_the_wall_time_is_never_negative(project, capsys, case, act, shown):
    last, _ = run_ids(project)
    with RunStore(store_of(project), readonly=True) as store:
        measured = store.get_run(last).wall_seconds
    assert measured is not None and measured > 0
    if act == "back":
        sql(project, "UPDATE runs SET wall_seconds = NULL WHERE id = ?", (last,))
        _step_back(project, last, 1, finished=True)
    capsys.readouterr()
    assert main(["-C", str(project), "show", last]) == 0
    wall = capsys.readouterr().out.split("wall time ", 1)[1].split()[0]
    assert wall == (shown or f"{measured:.1f}s")


def test_a_wall_time_not_measured_says_it_spans_the_pauses(project, capsys):
    last, _ = run_ids(project)  # as a run resumed after a kill leaves it
    sql(project, "UPDATE runs SET wall_seconds = NULL WHERE id = ?", (last,))
    capsys.readouterr()
    assert main(["-C", str(project), "show", last]) == 0
    assert "(start to end, any pause included)" in capsys.readouterr().out
