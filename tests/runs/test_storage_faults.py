"""A .skynet that cannot be used (a file where a folder should be, a damaged or truncated
database, a folder where a database should be) is one line on stderr naming the file and the fix,
exit 2, no traceback; nothing recorded is lost, and no run is left "running"."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from projects import make_project, task_responder

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.store import runs_db_path


def _close_sessions() -> None:
    """Close what the last in-process command left open, so its WAL is in the main file."""
    from skynet.models import client

    if client._global is not None:
        client._global.close()
        client._global = None
    gc.collect()  # a store the command left open closes with its object


def _checkpoint(path: Path) -> None:
    _close_sessions()
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        db.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _page_of(path: Path, table: str) -> int:
    """The byte offset of a table's root page."""
    db = sqlite3.connect(path)
    try:
        (root,) = db.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
        (size,) = db.execute("PRAGMA page_size").fetchone()
    finally:
        db.close()
    return (root - 1) * size


def _scribble(path: Path, offset: int, size: int = 4096) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(size))


# -- the faults: each takes the project folder and damages .skynet ------------------------------


def _skynet_is_a_file(project: Path) -> None:
    shutil.move(project / ".skynet", project / "skynet.saved")
    (project / ".skynet").write_text("not a folder")


def _cache_is_a_folder(project: Path) -> None:
    cache = project / ".skynet" / "cache.db"
    _checkpoint(cache)
    cache.unlink()
    cache.mkdir()


def _cache_is_garbage(project: Path) -> None:
    _close_sessions()
    (project / ".skynet" / "cache.db").write_bytes(os.urandom(5000))


def _cache_cut_in_half(project: Path) -> None:
    cache = project / ".skynet" / "cache.db"
    _checkpoint(cache)
    os.truncate(cache, cache.stat().st_size // 2)


def _runs_db_page_2(project: Path) -> None:
    db = runs_db_path(project)
    _checkpoint(db)
    _scribble(db, 4096)


def _runs_db_candidates_page(project: Path) -> None:
    db = runs_db_path(project)
    _checkpoint(db)
    _scribble(db, _page_of(db, "candidates"))


def _runs_db_evaluations_page(project: Path) -> None:
    db = runs_db_path(project)
    _checkpoint(db)
    _scribble(db, _page_of(db, "evaluations"))


def _run_files_folder_is_a_file(project: Path) -> None:
    _close_sessions()
    shutil.rmtree(project / ".skynet" / "runs")
    (project / ".skynet" / "runs").write_text("not a folder")


# (case, fault, command, exit code, what the line names (None: no error line))
ROWS: list[tuple[str, Callable[[Path], None], list[str], int, tuple[str, ...] | None]] = [
    (".skynet a file: check", _skynet_is_a_file, ["check"], 2, (".skynet is a file", "mv ")),
    (".skynet a file: run", _skynet_is_a_file, ["run"], 2, (".skynet is a file", "mv ")),
    (
        ".skynet a file: eval",
        _skynet_is_a_file,
        ["eval", "--candidate", "seed"],
        2,
        (".skynet is a file", "mv "),
    ),
    (".skynet a file: runs", _skynet_is_a_file, ["runs"], 2, (".skynet is a file", "mv ")),
    (".skynet a file: show", _skynet_is_a_file, ["show"], 2, (".skynet is a file", "mv ")),
    ("cache a folder: check", _cache_is_a_folder, ["check"], 2, ("cache.db", "folder", "mv ")),
    ("cache a folder: run", _cache_is_a_folder, ["run"], 2, ("cache.db", "folder", "mv ")),
    ("cache garbage: check", _cache_is_garbage, ["check"], 2, ("cache.db", "not a", "mv ")),
    ("cache garbage: run", _cache_is_garbage, ["run"], 2, ("cache.db", "not a", "mv ")),
    ("cache cut in half: check", _cache_cut_in_half, ["check"], 2, ("cache.db", "damaged")),
    ("cache cut in half: run", _cache_cut_in_half, ["run"], 2, ("cache.db", "damaged", "mv ")),
    ("runs.db page 2: run", _runs_db_page_2, ["run"], 2, ("runs.db", "damaged", "mv ")),
    ("runs.db page 2: show", _runs_db_page_2, ["show"], 2, ("runs.db", "damaged", "mv ")),
    ("runs.db page 2: runs", _runs_db_page_2, ["runs"], 2, ("runs.db", "damaged", "mv ")),
    (
        "runs.db page 2: eval",
        _runs_db_page_2,
        ["eval", "--candidate", "seed"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
    (
        "candidates page: run",
        _runs_db_candidates_page,
        ["run"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
    (
        "candidates page: show",
        _runs_db_candidates_page,
        ["show"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
    ("candidates page: runs (not read)", _runs_db_candidates_page, ["runs"], 0, None),
    (
        "candidates page: eval",
        _runs_db_candidates_page,
        ["eval", "--candidate", "seed"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
    (
        "evaluations page: show",
        _runs_db_evaluations_page,
        ["show"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
    (
        "evaluations page: run",
        _runs_db_evaluations_page,
        ["run"],
        2,
        ("runs.db", "damaged", "mv "),
    ),
]


@pytest.fixture
def recorded(tmp_path, scripted_server):
    """A project with one finished run, and its runs as RunStore lists them."""
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    _checkpoint(runs_db_path(project))
    with RunStore(runs_db_path(project)) as store:
        runs = store.list_runs()
    return project, runs


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "fault", "command", "code", "names"), ROWS, ids=[r[0] for r in ROWS]
)
def test_a_storage_fault_is_one_line_and_loses_nothing(
    recorded, capsys, case, fault, command, code, names
):
    project, runs = recorded
    fault(project)
    db = runs_db_path(project)
    damaged = hashlib.sha256(db.read_bytes()).hexdigest() if db.exists() else ""
    capsys.readouterr()
    assert main(["-C", str(project), *command]) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    if names is None:
        assert lines == []
    else:
        assert len(lines) == 1, err
        assert lines[0].startswith("skynet: error: "), lines[0]
        for needle in names:
            assert needle in lines[0], (needle, lines[0])
    _close_sessions()
    if fault is _skynet_is_a_file:
        (project / ".skynet").unlink()
        shutil.move(project / "skynet.saved", project / ".skynet")
    if fault in (_runs_db_page_2, _runs_db_candidates_page, _runs_db_evaluations_page):
        # Skynet wrote nothing into the damaged file: what it held can still be salvaged.
        assert not Path(f"{db}-wal").exists() or Path(f"{db}-wal").stat().st_size == 0
        assert hashlib.sha256(db.read_bytes()).hexdigest() == damaged
        return
    with RunStore(db) as store:
        assert store.list_runs() == runs  # no new row (no "running" one), the old one as it was


@pytest.mark.slow
def test_a_run_that_fails_after_it_started_is_marked_failed_not_running(recorded, capsys):
    project, runs = recorded
    _run_files_folder_is_a_file(project)
    capsys.readouterr()
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err
    # The run had started (its first line says so); the fault is the one line after it, then
    # how to resume the run once it is fixed.
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 3 and lines[0].startswith("run ") and "Traceback" not in err, err
    assert lines[1].startswith("skynet: error: "), lines[1]
    assert ".skynet/runs is a file" in lines[1] and "mv " in lines[1], lines[1]
    run_id = lines[0].split()[1].rstrip(":")
    assert lines[2] == (
        f"  run {run_id} is kept as recorded: once that is fixed, `skynet run --resume {run_id}` "
        "goes on from it (nothing recorded is sent again)"
    )
    _close_sessions()
    with RunStore(runs_db_path(project)) as store:
        now = store.list_runs()
    assert now[1:] == runs  # the earlier run as it was
    assert now[0].status == "failed"
    assert "is a file" in (now[0].error or "")


@pytest.mark.slow
def test_moving_a_damaged_run_store_aside_as_told_lets_the_next_run_start(recorded, capsys):
    project, _ = recorded
    _runs_db_candidates_page(project)
    assert main(["-C", str(project), "run"]) == 2
    line = capsys.readouterr().err.strip()
    advice = line.split("(mv ", 1)[1].split(")", 1)[0]
    source, target = advice.split(" ")
    _close_sessions()
    shutil.move(source, target)
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(runs_db_path(project)) as store:
        assert [r.status for r in store.list_runs()] == ["finished"]
    assert Path(target).exists()  # the damaged file is kept, for salvage


@pytest.mark.slow
def test_a_call_cache_found_damaged_mid_run_is_a_miss_said_once(tmp_path):
    from skynet.models.cache import CachedCall, CallCache

    path = tmp_path / "cache.db"
    cache = CallCache(path)
    call = CachedCall(
        reply={"text": "Paris"}, input_tokens=1, output_tokens=1, cost_usd=0.0, elapsed_ns=1
    )
    cache.put("k", "m", call)
    assert cache.get("k") == call
    cache.close()
    _checkpoint(path)
    cache = CallCache(path)  # opens: its first pages are whole
    _scribble(path, _page_of(path, "calls"))
    with pytest.warns(RuntimeWarning, match=r"cache\.db: the call cache is damaged.*mv ") as said:
        assert cache.get("k") is None
        assert cache.get("k") is None  # said once
        cache.put("k2", "m", call)  # not written into a damaged file
    assert len(said) == 1
    cache.close()
