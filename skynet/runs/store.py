"""The run store: every record of every run, in one SQLite file beside skynet.toml.

`.skynet/runs.db` holds the runs (config, dataset and metric hashes, status), their candidates
with lineage, every evaluation (output, score, feedback, scores, Observation, error), every model
call by role and every proposal the reflection step made. Each write is committed at once, so a
run killed at any point keeps everything it recorded and resumes without paying twice.

The schema changes only through `MIGRATIONS`, an append-only list of numbered functions; the
ones applied are recorded in the database with their time (simonw/llm's pattern). A database
that records a migration this code does not know was written by a newer Skynet and is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skynet.errors import ConfigError, StorageError
from skynet.evaluation import Result
from skynet.measure import Observation
from skynet.models.ledger import CALL_TEXT_BYTES, ROLES, CallRecord, LedgerTotals, kept_text
from skynet.storage import folder_error, is_fault, storage_error

__all__ = [
    "EVALUATION",
    "MIGRATIONS",
    "RUN_STATUSES",
    "SEEDS",
    "CandidateRow",
    "EvaluationRow",
    "ProposalRow",
    "RunRow",
    "RunStore",
    "runs_db_path",
    "stored_output",
]

RUNS_DIR = ".skynet"
RUNS_DB = "runs.db"
RUNNING = "running"
RUN_STATUSES = ("running", "finished", "stopped", "aborted", "failed")
# The engine of a run that only evaluated candidates (`skynet eval` with no optimization run to
# record into): it has no best candidate and cannot be resumed as an optimization.
EVALUATION = "eval"
# The seeds a run can record: SQLite's INTEGER is 64-bit signed.
SEEDS = range(-(2**63), 2**63)
BUSY_TIMEOUT_MS = 30_000
_RECENT = 5  # how many run ids an "unknown run" error lists
_RUN_JSON = ("config", "budget", "versions", "notes")  # a run's columns that hold JSON objects
_WHAT = "Skynet run store"
# What moving a damaged run store aside keeps: the old file, for salvage.
_LOST = "the .bad file keeps the earlier runs, for sqlite3's .recover"


def runs_db_path(project_dir: Path) -> Path:
    """Where the run store of a project lives: `.skynet/runs.db` beside skynet.toml.

    Args:
        project_dir: the directory holding skynet.toml.
    """
    return Path(project_dir) / RUNS_DIR / RUNS_DB


# --------------------------------------------------------------------------------------------
# Migrations. Append only: never edit or reorder one that has shipped; a change is a new one.
# Each runs inside the transaction that records it, so it is applied entirely or not at all.


def m001_initial(db: sqlite3.Connection) -> None:
    """Runs, candidates, evaluations, model calls and proposals."""
    db.execute(
        """
        CREATE TABLE runs (
            id TEXT PRIMARY KEY,
            created TEXT NOT NULL,
            status TEXT NOT NULL,
            config TEXT NOT NULL,
            dataset_hash TEXT NOT NULL,
            metric_hash TEXT NOT NULL,
            seed INTEGER NOT NULL,
            engine TEXT NOT NULL,
            budget TEXT NOT NULL,
            versions TEXT NOT NULL,
            best_candidate_id TEXT,
            seed_candidate_id TEXT,
            error TEXT,
            finished TEXT,
            notes TEXT NOT NULL DEFAULT '{}'
        )
        """
    )
    db.execute(
        """
        CREATE TABLE candidates (
            run_id TEXT NOT NULL REFERENCES runs(id),
            id TEXT NOT NULL,
            content TEXT NOT NULL,
            parents TEXT NOT NULL DEFAULT '[]',
            seq INTEGER NOT NULL,
            created TEXT NOT NULL,
            PRIMARY KEY (run_id, id)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE evaluations (
            run_id TEXT NOT NULL REFERENCES runs(id),
            candidate_id TEXT NOT NULL,
            split TEXT NOT NULL,
            item_id TEXT NOT NULL,
            output TEXT,
            output_is_repr INTEGER NOT NULL DEFAULT 0,
            score REAL,
            feedback TEXT NOT NULL DEFAULT '',
            scores TEXT NOT NULL DEFAULT '{}',
            extra TEXT NOT NULL DEFAULT '{}',
            observation TEXT,
            error TEXT,
            error_kind TEXT,
            traceback TEXT NOT NULL DEFAULT '',
            notes TEXT NOT NULL DEFAULT '[]',
            metric_hash TEXT NOT NULL,
            created TEXT NOT NULL,
            seq INTEGER NOT NULL,
            UNIQUE (run_id, candidate_id, item_id, metric_hash)
        )
        """
    )
    db.execute("CREATE INDEX evaluations_run_seq ON evaluations (run_id, seq)")
    db.execute(
        """
        CREATE TABLE calls (
            run_id TEXT NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            model TEXT NOT NULL,
            elapsed_ms REAL NOT NULL,
            input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            cost_usd REAL,
            cached INTEGER NOT NULL,
            attempts INTEGER NOT NULL,
            ok INTEGER NOT NULL,
            error TEXT NOT NULL,
            item_id TEXT,
            created TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX calls_run ON calls (run_id, role)")
    db.execute(
        """
        CREATE TABLE proposals (
            run_id TEXT NOT NULL REFERENCES runs(id),
            seq INTEGER NOT NULL,
            parent_id TEXT,
            status TEXT NOT NULL,
            detail TEXT NOT NULL,
            text TEXT NOT NULL,
            created TEXT NOT NULL
        )
        """
    )
    db.execute("CREATE INDEX proposals_run ON proposals (run_id, seq)")


def m002_repetitions(db: sqlite3.Connection) -> None:
    """Every run of an item made with `repeat = N` (N > 1): outputs, scores, errors, as JSON."""
    db.execute("ALTER TABLE evaluations ADD COLUMN repetitions TEXT NOT NULL DEFAULT '[]'")


def m003_items_and_call_text(db: sqlite3.Connection) -> None:
    """The items a run was given (input and expected, by split), so a report shows them without
    the project's data; each model call's request and reply, shown on demand by the viewer."""
    db.execute(
        """
        CREATE TABLE items (
            run_id TEXT NOT NULL REFERENCES runs(id),
            item_id TEXT NOT NULL,
            split TEXT NOT NULL,
            input TEXT NOT NULL,
            expected TEXT,
            seq INTEGER NOT NULL,
            PRIMARY KEY (run_id, item_id)
        )
        """
    )
    db.execute("ALTER TABLE calls ADD COLUMN prompt TEXT NOT NULL DEFAULT ''")
    db.execute("ALTER TABLE calls ADD COLUMN reply TEXT NOT NULL DEFAULT ''")


def m004_wall_seconds(db: sqlite3.Connection) -> None:
    """How long a run made in one go ran, on a monotonic clock: its `created` and `finished`
    come from the wall clock, which may be stepped (NTP, a suspended laptop) while it runs."""
    db.execute("ALTER TABLE runs ADD COLUMN wall_seconds REAL")


def m005_unmeasured_calls(db: sqlite3.Connection) -> None:
    """Model calls seen but not measured (a program's or a metric's own dspy.LM, outside
    Skynet's models): their tokens and cost are unknown, never 0."""
    db.execute("ALTER TABLE calls ADD COLUMN measured INTEGER NOT NULL DEFAULT 1")


def m006_error_type(db: sqlite3.Connection) -> None:
    """An evaluation's error type (the exception's qualified name) as data: a resume decides
    what to ask again on it. Errors recorded before carry it in their traceback's last line."""
    db.execute("ALTER TABLE evaluations ADD COLUMN error_type TEXT")
    rows = db.execute(
        "SELECT rowid, traceback FROM evaluations WHERE error IS NOT NULL AND traceback != ''"
    ).fetchall()
    db.executemany(
        "UPDATE evaluations SET error_type = ? WHERE rowid = ?",
        [(error_type_in(tb), rowid) for rowid, tb in rows if error_type_in(tb)],
    )


def error_type_in(traceback: str | None) -> str | None:
    """The exception's qualified name in a formatted traceback's last line
    ("skynet.errors.ModelError: ..."), for errors recorded before their type was (m006)."""
    lines = (traceback or "").strip().splitlines()
    found = re.match(r"([A-Za-z_][\w.]*)(?::|$)", lines[-1]) if lines else None
    return found.group(1) if found else None


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [
    m001_initial,
    m002_repetitions,
    m003_items_and_call_text,
    m004_wall_seconds,
    m005_unmeasured_calls,
    m006_error_type,
]

_MIGRATIONS_TABLE = "skynet_migrations"

# A proposal's verdict (the engine's, after the reflection's own status): made again by a
# resumed search, so the last attempt's are dropped on resume.
VERDICTS = ("accepted", "rejected")


# --------------------------------------------------------------------------------------------
# Rows handed out by the store.


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRow:
    """One run as recorded.

    Attributes:
        id: readable unique id, e.g. "20261202-154501-3fa2" (UTC start time + 4 hex digits).
        created: ISO-8601 UTC time the run was created.
        status: one of running, finished, stopped, aborted, failed.
        config: the resolved configuration the run started with.
        dataset_hash: hash of the dataset the run used.
        metric_hash: hash of the metric source the run started with.
        seed: the engine's random seed.
        engine: the engine's name; `EVALUATION` ("eval") for a run that only evaluated.
        budget: the budget limits the run started with.
        versions: versions of Skynet and its engines.
        best_candidate_id: the best candidate so far, when the engine has said.
        seed_candidate_id: the starting (baseline) candidate.
        error: why the run failed or was aborted, when it did.
        finished: ISO-8601 UTC time the run ended (None while running).
        notes: free-form JSON facts about the run (e.g. choices the engine made).
        wall_seconds: how long it ran, on a monotonic clock, its resumes' pauses left out
            (None: still running, resumed after a process that was killed, or recorded before
            this was kept).
        damaged: what of its record cannot be read ("" when it is whole); only
            `list_runs(damaged=True)` hands out such a row, its unreadable fields empty.
    """

    id: str
    created: str
    status: str
    config: dict[str, Any]
    dataset_hash: str
    metric_hash: str
    seed: int
    engine: str
    budget: dict[str, Any]
    versions: dict[str, Any]
    best_candidate_id: str | None = None
    seed_candidate_id: str | None = None
    error: str | None = None
    finished: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    wall_seconds: float | None = None
    damaged: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CandidateRow:
    """One candidate of a run: its components' text, its parents and first-seen order."""

    id: str
    content: dict[str, str]
    parents: list[str]
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationRow:
    """One recorded evaluation of a candidate on an item.

    Attributes:
        output: the artifact's output; when it was not JSON-able, its repr, and past
            CALL_TEXT_BYTES its text cut with its size and sha256 (both: output_is_repr, it
            cannot be scored again).
        score: None when the evaluation is an error.
        observation: the Observation's fields, or None when none was recorded.
        seq: order of recording within the run (1, 2, …).
        metric_hash: the metric the score came from (another hash than the run's: stale).
    """

    item_id: str
    candidate_id: str
    split: str
    output: Any
    score: float | None
    feedback: str
    scores: dict[str, float]
    observation: dict[str, Any] | None
    error: str | None
    error_kind: str | None
    seq: int
    metric_hash: str
    output_is_repr: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    traceback: str = ""
    notes: tuple[str, ...] = ()
    created: str = ""
    repetitions: tuple[dict[str, Any], ...] = ()
    error_type: str | None = None

    def result(self) -> Result:
        """The skynet.Result this row records (Observation rebuilt from its fields)."""
        return result_from(
            {
                "item_id": self.item_id,
                "output": self.output,
                "score": self.score,
                "feedback": self.feedback,
                "scores": self.scores,
                "extra": self.extra,
                "observation": self.observation,
                "error": self.error,
                "error_kind": self.error_kind,
                "traceback": self.traceback,
                "notes": self.notes,
                "repetitions": self.repetitions,
                "error_type": self.error_type,
            }
        )


# -- the one codec between a Result and its record (an evaluation's row, a repetition's JSON) --


def result_record(result: Result) -> dict[str, Any]:
    """What runs.db keeps of `result`, as JSON-able fields: the output (its repr when it is not
    JSON-able, cut past CALL_TEXT_BYTES: output_is_repr), no score for an error, texts bounded
    (what a candidate raises is its own to make huge), and each repetition the same way."""
    output, output_is_repr = _encode_output(result.output)
    return {
        "item_id": result.item_id,
        "output": json.loads(output),
        "output_is_repr": output_is_repr,
        "score": None if result.error is not None else _float_or_none(result.score),
        "feedback": _text(_bounded(result.feedback)) or "",
        "scores": dict(result.scores),
        "extra": dict(result.extra),
        "observation": None if result.observation is None else result.observation.as_dict(),
        "error": _text(_bounded(result.error)),
        "error_kind": result.error_kind,
        "traceback": _text(_bounded(result.traceback)) or "",
        "notes": list(result.notes),
        "repetitions": [result_record(r) for r in result.repetitions],
        "error_type": result.error_type,
    }


def result_from(record: Mapping[str, Any]) -> Result:
    """The Result a record (result_record's fields, or a row's) holds; a field an older record
    lacks takes its default."""
    return Result(
        item_id=record.get("item_id", ""),
        output=record.get("output"),
        score=record.get("score"),
        feedback=record.get("feedback") or "",
        scores=dict(record.get("scores") or {}),
        extra=dict(record.get("extra") or {}),
        observation=_observation_from(record.get("observation")),
        error=record.get("error"),
        error_kind=record.get("error_kind"),
        traceback=record.get("traceback") or "",
        notes=tuple(record.get("notes") or ()),
        repetitions=tuple(result_from(r) for r in record.get("repetitions") or ()),
        # A repetition recorded before m006 has its type only in its traceback.
        error_type=record["error_type"]
        if "error_type" in record
        else error_type_in(record.get("traceback")),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemRow:
    """One item a run was given: its split, input and expected output (None: unlabeled)."""

    item_id: str
    split: str
    input: Any
    expected: Any
    seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRow:
    """One recorded model call with its place in the run (seq, time); its request and reply
    are read on demand (RunStore.call), not with every listing."""

    seq: int
    created: str
    call: CallRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class ProposalRow:
    """One proposal of the reflection step: accepted, rejected, empty or failed, and why."""

    seq: int
    parent_id: str | None
    status: str
    detail: str
    text: str
    created: str


# --------------------------------------------------------------------------------------------
# Helpers.


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# What a run made from Python is rescored, evaluated or resumed with: its metric and rows are in
# the caller's code, not in a project folder (the CLI's advice and the run's own say it alike).
FROM_PYTHON = {
    "rescore": 'skynet.rescore("{run}", metric=score, data=rows, store="{store}")',
    "eval": 'skynet.evaluate(result.best, metric=score, data=rows, store="{store}")',
    "run": 'skynet.resume("{run}", seed, metric=score, train=..., val=..., store="{store}")',
}


def _bounded(value: str | None) -> str | None:
    """A feedback, error or traceback text as runs.db keeps it: at most CALL_TEXT_BYTES, the
    rest said by its size and sha256 (what a candidate raises is its own to make huge)."""
    return None if value is None else kept_text(value, CALL_TEXT_BYTES)


def _text(value: str | None) -> str | None:
    """Text for a TEXT column: a lone surrogate (a model reply, a candidate's output quoted in
    feedback) is kept as its escape (\\ud800) instead of failing the write and losing the row."""
    if value is None:
        return None
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _dumps(value: Any) -> str:
    # Anything a user hands over (extra, notes) is kept: what JSON cannot hold is kept as its repr.
    return json.dumps(value, default=repr, sort_keys=False)


def _encode_output(output: Any) -> tuple[str, bool]:
    """The output's JSON and whether it is not the output itself: its repr when it is not
    JSON-able, or its text cut (stored_output)."""
    try:
        text, is_repr = json.dumps(output), False
    except (TypeError, ValueError, RecursionError):
        text, is_repr = json.dumps(repr(output)), True
    if len(text) <= CALL_TEXT_BYTES:  # json.dumps writes ASCII: a character is a byte
        return text, is_repr
    whole = output if isinstance(output, str) else json.loads(text) if is_repr else text
    return json.dumps(kept_text(whole, CALL_TEXT_BYTES)), True


def stored_output(output: Any) -> Any:
    """`output` as runs.db keeps it: itself, or past CALL_TEXT_BYTES (as JSON) its text cut,
    with the size and sha256 of the rest. A candidate may return what it likes; the run's store
    grows with its evaluations, not with their size. What an engine is handed the first time,
    so that a replay from the records hands it the same."""
    try:
        small = len(json.dumps(output)) <= CALL_TEXT_BYTES
    except (TypeError, ValueError, RecursionError):
        small = len(json.dumps(repr(output))) <= CALL_TEXT_BYTES
    return output if small else json.loads(_encode_output(output)[0])


_OBS_FIELDS = tuple(f.name for f in dataclasses.fields(Observation))


def _observation_from(data: dict[str, Any] | None) -> Observation | None:
    if data is None:
        return None
    # Keep only the fields this Observation has: an older record lacks none that are required.
    return Observation(**{k: v for k, v in data.items() if k in _OBS_FIELDS})


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return None if math.isnan(number) else number


class RunStore:
    """The run store of one project: a SQLite file in WAL mode, safe to share between threads.

    Every write is committed before the call returns. Opening the store creates the file and its
    directory when missing and applies any migration not yet recorded.

    Args:
        path: the database file, usually `runs_db_path(project_dir)` (`.skynet/runs.db`).
        readonly: only read (`skynet show`, `runs`, `view`): the file must exist, and opening
            takes no write lock, so a reader answers at once while a run writes. A file an
            older Skynet wrote is migrated first, that one time as a writer would.

    Raises:
        StorageError: the file is not a run store, is damaged, or cannot be written (a
            ConfigError; this and every later call say which file and the fix).
        ConfigError: the file was written by a newer Skynet.
    """

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.RLock()
        # When each run this store created began, on the monotonic clock (see set_status).
        self._began: dict[str, float] = {}
        # A resumed run's time before this process: None when unknown (it was killed).
        self._carried: dict[str, float | None] = {}
        if readonly and self._open_reading():
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise folder_error(self.path.parent, exc, what=_WHAT) from None
        # isolation_level=None: no implicit transactions; each write commits at once unless it
        # is grouped explicitly in _transaction().
        try:
            self._db = sqlite3.connect(
                str(self.path), check_same_thread=False, isolation_level=None, timeout=30
            )
        except sqlite3.Error as exc:
            raise storage_error(self.path, exc, what=_WHAT, lost=_LOST) from None
        self._db.row_factory = sqlite3.Row
        try:
            with self._faults():
                self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                self._db.execute("PRAGMA journal_mode = WAL")
                # WAL + NORMAL: every commit survives a killed process (SIGKILL); only a power
                # loss can take the last ones back. FULL would sync the disk on every evaluation.
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._db.execute("PRAGMA foreign_keys = ON")
                self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _open_reading(self) -> bool:
        """Open the file read-only; False (closed again) when it lacks a migration, which only
        a writer can apply."""
        try:
            self._db = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?mode=ro",
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                timeout=30,
            )
        except sqlite3.Error as exc:
            raise storage_error(self.path, exc, what=_WHAT, lost=_LOST) from None
        self._db.row_factory = sqlite3.Row
        try:
            with self._faults():
                self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                tables = self._db.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (_MIGRATIONS_TABLE,),
                ).fetchall()
                applied = self._applied(self._db) if tables else []
        except BaseException:
            self._db.close()
            raise
        if len(applied) < len(MIGRATIONS):
            self._db.close()
            return False
        return True

    @contextmanager
    def _faults(self) -> Iterator[None]:
        """sqlite3 errors of the file (damaged, locked, unwritable) as one StorageError that
        names it and the fix; an IntegrityError (callers' business) and the SQL's own errors
        (bugs) pass as they are."""
        try:
            yield
        except sqlite3.IntegrityError:
            raise
        except sqlite3.DatabaseError as exc:
            if not is_fault(exc):
                raise
            raise storage_error(self.path, exc, what=_WHAT, lost=_LOST) from exc

    def check_integrity(self) -> None:
        """Refuse a damaged file before a writer starts on it (SQLite's quick_check: every page
        read, no index cross-check). A run that cannot record must not start.

        Raises:
            StorageError: the file is damaged; the message says to move it aside.
        """
        with self._lock, self._faults():
            rows = self._db.execute("PRAGMA quick_check(1)").fetchall()
        problem = str(rows[0][0]) if rows else "no answer"
        if problem != "ok":
            raise storage_error(
                self.path,
                sqlite3.DatabaseError(f"database disk image is malformed: {problem}"),
                what=_WHAT,
                lost=_LOST,
            )

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database. Everything written is already committed."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # BEGIN IMMEDIATE takes the write lock up front, so a read-then-write (a seq number, a
        # notes update) cannot race another process writing the same run.
        with self._lock, self._faults():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # a damaged file may have ended the transaction itself: say the first
                raise
            self._db.execute("COMMIT")

    def _applied(self, db: sqlite3.Connection) -> list[str]:
        """The migrations the file records; one this code does not know is refused."""
        known = [m.__name__ for m in MIGRATIONS]
        applied = [
            r["name"] for r in db.execute(f"SELECT name FROM {_MIGRATIONS_TABLE} ORDER BY id")
        ]
        unknown = [name for name in applied if name not in known]
        if unknown:
            raise ConfigError(
                f"{self.path} was made by a newer Skynet: it records schema migration(s) "
                f"{', '.join(unknown)} that this version does not know; upgrade Skynet "
                "(pip install -U skynet-optimizer) to read it"
            )
        return applied

    def _migrate(self) -> None:
        with self._transaction() as db:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {_MIGRATIONS_TABLE} "
                "(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, applied TEXT NOT NULL)"
            )
            applied = self._applied(db)
            for migration in MIGRATIONS:
                if migration.__name__ in applied:
                    continue
                migration(db)
                db.execute(
                    f"INSERT INTO {_MIGRATIONS_TABLE} (name, applied) VALUES (?, ?)",
                    (migration.__name__, _now()),
                )

    def migrations(self) -> list[tuple[str, str]]:
        """The migrations applied to this database, in order, as (name, ISO time applied)."""
        rows = self._query(f"SELECT name, applied FROM {_MIGRATIONS_TABLE} ORDER BY id")
        return [(r["name"], r["applied"]) for r in rows]

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock, self._faults():
            return self._db.execute(sql, params).fetchall()

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        with self._lock, self._faults():
            return self._db.execute(sql, params).rowcount

    # -- runs -----------------------------------------------------------------------------------

    def create_run(
        self,
        *,
        config: dict[str, Any],
        dataset_hash: str,
        metric_hash: str,
        seed: int,
        engine: str,
        budget: dict[str, Any],
        versions: dict[str, Any],
    ) -> str:
        """Record a new run with status "running".

        Args:
            config: the resolved configuration (JSON-able).
            dataset_hash: hash of the dataset.
            metric_hash: hash of the metric source.
            seed: the engine's random seed.
            engine: the engine's name.
            budget: the budget limits.
            versions: versions of Skynet and the engine libraries.

        Returns:
            The new run's id, e.g. "20261202-154501-3fa2" (UTC time and 4 random hex digits).

        Raises:
            ConfigError: the seed is outside SEEDS (SQLite's 64-bit integer).
        """
        if int(seed) not in SEEDS:
            raise ConfigError(
                f"engine.seed = {seed} is outside the seeds a run can record ({SEEDS.start} to "
                f"{SEEDS.stop - 1}, SQLite's 64-bit integer); choose a seed in that range, e.g. 0"
            )
        now = datetime.now(timezone.utc)
        for _ in range(100):
            run_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
            try:
                self._write(
                    "INSERT INTO runs (id, created, status, config, dataset_hash, metric_hash, "
                    "seed, engine, budget, versions, notes) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '{}')",
                    (
                        run_id,
                        now.isoformat(timespec="milliseconds"),
                        RUNNING,
                        _dumps(config),
                        dataset_hash,
                        metric_hash,
                        int(seed),
                        engine,
                        _dumps(budget),
                        _dumps(versions),
                    ),
                )
            except sqlite3.IntegrityError:
                continue  # two runs started in the same second drew the same suffix
            self._began[run_id] = time.monotonic()
            return run_id
        raise RuntimeError("could not draw a unique run id in 100 tries")  # pragma: no cover

    def _run_row(self, r: sqlite3.Row, *, damaged: bool = False) -> RunRow:
        """The run of a row. A JSON field that does not read as an object (a damaged record)
        raises a StorageError naming the run; with `damaged`, the row is handed out with it
        empty and `damaged` saying why."""
        fields: dict[str, dict[str, Any]] = {}
        why = ""
        for column in _RUN_JSON:
            try:
                value = json.loads(r[column])
            except (TypeError, ValueError) as exc:  # ValueError: JSONDecodeError, not UTF-8
                value, problem = {}, f"not JSON ({exc})"
            else:
                problem = "" if isinstance(value, dict) else "not a JSON object"
            if problem and not why:
                why = f"its stored {column} is {problem}"
            fields[column] = value if isinstance(value, dict) else {}
        if why and not damaged:
            raise StorageError(
                f"{self.path}: the record of run {r['id']} is damaged: {why}; the other runs "
                "are whole: `skynet runs` lists them, `skynet show RUN` reports one"
            )
        return RunRow(
            id=r["id"],
            created=r["created"],
            status=r["status"],
            dataset_hash=r["dataset_hash"],
            metric_hash=r["metric_hash"],
            seed=r["seed"],
            engine=r["engine"],
            best_candidate_id=r["best_candidate_id"],
            seed_candidate_id=r["seed_candidate_id"],
            error=r["error"],
            finished=r["finished"],
            wall_seconds=r["wall_seconds"],
            damaged=why,
            **fields,
        )

    def _unknown_run(self, run_id: str) -> ConfigError:
        recent = [
            r["id"]
            for r in self._query("SELECT id FROM runs ORDER BY rowid DESC LIMIT ?", (_RECENT,))
        ]
        if not recent:
            return ConfigError(
                f"no run '{run_id}' in {self.path}: it holds no runs yet; start one with "
                "`skynet run`"
            )
        return ConfigError(
            f"no run '{run_id}' in {self.path}; the most recent are: {', '.join(recent)}. "
            "Pass one of those ids"
        )

    def get_run(self, run_id: str) -> RunRow:
        """The run with this id.

        Raises:
            ConfigError: no such run; the message lists the most recent ids.
        """
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise self._unknown_run(run_id)
        return self._run_row(rows[0])

    # Newest is the last recorded (rowid order), never the latest `created`: a wall clock
    # stepped back puts a new run's time before an older one's.

    def latest_run(self) -> RunRow | None:
        """The run recorded last, or None when there is none."""
        rows = self._query("SELECT * FROM runs ORDER BY rowid DESC LIMIT 1")
        return self._run_row(rows[0]) if rows else None

    def list_runs(self, *, damaged: bool = False) -> list[RunRow]:
        """Every run, the last recorded first.

        Args:
            damaged: hand out a run whose record cannot be read, with `damaged` saying why,
                rather than raise StorageError for it (`skynet runs` lists the others).
        """
        rows = self._query("SELECT * FROM runs ORDER BY rowid DESC")
        return [self._run_row(r, damaged=damaged) for r in rows]

    def _update_run(self, run_id: str, sql: str, params: tuple[Any, ...]) -> None:
        if self._write(f"UPDATE runs SET {sql} WHERE id = ?", (*params, run_id)) == 0:
            raise self._unknown_run(run_id)

    def set_status(self, run_id: str, status: str, *, error: str | None = None) -> None:
        """Set a run's status; any status but "running" also stamps the finish time, and, for
        a run this store created or resumed, how long it ran on the monotonic clock
        (wall_seconds). Set to "running" again (a resume), its wall_seconds so far is carried
        and this process's time added at its end, the pause left out; when the time before is
        unknown (its process was killed), so is the whole.

        Args:
            run_id: the run.
            status: one of running, finished, stopped, aborted, failed.
            error: why it failed or was aborted (cleared when None).

        Raises:
            ValueError: the status is not one of the above.
            ConfigError: no such run.
        """
        if status not in RUN_STATUSES:
            raise ValueError(
                f"run status {status!r} is not one of {', '.join(RUN_STATUSES)}; pass one of those"
            )
        began = self._began.pop(run_id, None)
        if status == RUNNING:
            # A resume: the time it ran before (known when it ended cleanly, not when killed) is
            # carried, and this process's time added at its end; a pause is in neither.
            if began is None:
                rows = self._query("SELECT wall_seconds FROM runs WHERE id = ?", (run_id,))
                before = rows[0]["wall_seconds"] if rows else None
                self._began[run_id] = time.monotonic()
                self._carried[run_id] = before
            else:
                self._began[run_id] = began
            self._update_run(
                run_id,
                "status = ?, error = ?, finished = NULL, wall_seconds = NULL",
                (status, _text(error)),
            )
            return
        carried = self._carried.pop(run_id, 0.0)
        wall = None if began is None or carried is None else carried + time.monotonic() - began
        # Another store's status (a run marked ended after its engine) keeps the figure.
        self._update_run(
            run_id,
            "status = ?, error = ?, finished = ?, wall_seconds = COALESCE(?, wall_seconds)",
            (status, _text(error), _now(), wall),
        )

    def set_best(self, run_id: str, candidate_id: str) -> None:
        """Record the run's best candidate so far."""
        self._update_run(run_id, "best_candidate_id = ?", (candidate_id,))

    def set_seed_candidate(self, run_id: str, candidate_id: str) -> None:
        """Record the run's starting (baseline) candidate."""
        self._update_run(run_id, "seed_candidate_id = ?", (candidate_id,))

    def set_note(self, run_id: str, key: str, value: Any) -> None:
        """Set one key of the run's notes (a JSON object), e.g. a choice the engine made.

        Raises:
            ConfigError: no such run.
            TypeError: the value is not JSON-able.
        """
        encoded = json.loads(json.dumps(value))
        with self._transaction() as db:
            row = db.execute("SELECT notes FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise self._unknown_run(run_id)
            notes = json.loads(row["notes"])
            notes[key] = encoded
            db.execute("UPDATE runs SET notes = ? WHERE id = ?", (json.dumps(notes), run_id))

    # -- candidates -----------------------------------------------------------------------------

    def add_candidate(
        self,
        run_id: str,
        candidate_id: str,
        content: dict[str, str],
        parents: list[str] | None = None,
    ) -> None:
        """Record a candidate of a run. Idempotent: the first call fixes its content and order.

        Args:
            run_id: the run.
            candidate_id: the candidate's id (stable for its content).
            content: component name → text.
            parents: ids of the candidates it was derived from; a later call that passes
                parents replaces the recorded ones.
        """
        try:
            self._add_candidate(run_id, candidate_id, content, parents)
        except sqlite3.IntegrityError as exc:  # foreign key: the run does not exist
            raise self._unknown_run(run_id) from exc

    def _add_candidate(
        self, run_id: str, candidate_id: str, content: dict[str, str], parents: list[str] | None
    ) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO candidates (run_id, id, content, parents, seq, created) "
                "SELECT ?, ?, ?, ?, COALESCE(MAX(seq), 0) + 1, ? FROM candidates WHERE run_id = ?",
                (
                    run_id,
                    candidate_id,
                    json.dumps(dict(content)),
                    json.dumps(list(parents or [])),
                    _now(),
                    run_id,
                ),
            )
            if parents is not None:
                db.execute(
                    "UPDATE candidates SET parents = ? WHERE run_id = ? AND id = ?",
                    (json.dumps(list(parents)), run_id, candidate_id),
                )

    def candidates(self, run_id: str) -> list[CandidateRow]:
        """The run's candidates in first-seen order."""
        rows = self._query("SELECT * FROM candidates WHERE run_id = ? ORDER BY seq", (run_id,))
        return [
            CandidateRow(
                id=r["id"],
                content=json.loads(r["content"]),
                parents=json.loads(r["parents"]),
                seq=r["seq"],
            )
            for r in rows
        ]

    # -- evaluations ----------------------------------------------------------------------------

    def record_evaluation(
        self, run_id: str, candidate_id: str, split: str, result: Result, metric_hash: str
    ) -> None:
        """Record one evaluation. Recording the same (candidate, item, metric) again is a no-op.

        Args:
            run_id: the run.
            candidate_id: the candidate evaluated.
            split: the item's split ("train", "val", "test").
            result: what Evaluation returned.
            metric_hash: hash of the metric that scored it.
        """
        record = result_record(result)
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT OR IGNORE INTO evaluations (run_id, candidate_id, split, item_id, "
                    "output, output_is_repr, score, feedback, scores, extra, observation, error, "
                    "error_kind, traceback, notes, metric_hash, created, repetitions, error_type, "
                    "seq) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "COALESCE(MAX(seq), 0) + 1 FROM evaluations WHERE run_id = ?",
                    (
                        run_id,
                        candidate_id,
                        split,
                        record["item_id"],
                        json.dumps(record["output"]),
                        int(record["output_is_repr"]),
                        record["score"],
                        record["feedback"],
                        _dumps(record["scores"]),
                        _dumps(record["extra"]),
                        None if record["observation"] is None else _dumps(record["observation"]),
                        record["error"],
                        record["error_kind"],
                        record["traceback"],
                        _dumps(record["notes"]),
                        metric_hash,
                        _now(),
                        _dumps(record["repetitions"]),
                        record["error_type"],
                        run_id,
                    ),
                )
        except sqlite3.IntegrityError as exc:  # foreign key: the run does not exist
            raise self._unknown_run(run_id) from exc

    def _evaluation_row(self, r: sqlite3.Row) -> EvaluationRow:
        """The evaluation of a row. A field that does not read as stored (a damaged record: a
        score that is not a number, JSON that is not JSON) raises a StorageError naming the run
        and the item."""
        try:
            score = r["score"]
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, float | int)
            ):
                raise ValueError(f"its score is {score!r}, not a number")
            return EvaluationRow(
                item_id=r["item_id"],
                candidate_id=r["candidate_id"],
                split=r["split"],
                output=None if r["output"] is None else json.loads(r["output"]),
                score=score,
                feedback=r["feedback"],
                scores=json.loads(r["scores"]),
                observation=None if r["observation"] is None else json.loads(r["observation"]),
                error=r["error"],
                error_kind=r["error_kind"],
                seq=r["seq"],
                metric_hash=r["metric_hash"],
                output_is_repr=bool(r["output_is_repr"]),
                extra=json.loads(r["extra"]),
                traceback=r["traceback"],
                notes=tuple(json.loads(r["notes"])),
                created=r["created"],
                repetitions=tuple(json.loads(r["repetitions"])),
                error_type=r["error_type"],
            )
        except (TypeError, ValueError) as exc:  # ValueError: JSONDecodeError, not UTF-8
            raise StorageError(
                f"{self.path}: the record of run {r['run_id']} is damaged: the evaluation of item "
                f"{r['item_id']!r} by candidate {r['candidate_id']}: {exc}; the other runs are "
                "whole: `skynet runs` lists them, `skynet show RUN` reports one"
            ) from None

    def forget_evaluation(
        self, run_id: str, candidate_id: str, item_id: str, metric_hash: str
    ) -> None:
        """Drop a recorded evaluation so it can be made again (a resumed run retries what the
        model or the network failed on)."""
        self._write(
            "DELETE FROM evaluations WHERE run_id = ? AND candidate_id = ? AND item_id = ? "
            "AND metric_hash = ?",
            (run_id, candidate_id, item_id, metric_hash),
        )

    def find_evaluation(
        self, run_id: str, candidate_id: str, item_id: str, metric_hash: str
    ) -> Result | None:
        """The recorded Result of this candidate on this item under this metric, if any.

        This is how a resumed run avoids paying twice for what it recorded.
        """
        rows = self._query(
            "SELECT * FROM evaluations WHERE run_id = ? AND candidate_id = ? AND item_id = ? "
            "AND metric_hash = ?",
            (run_id, candidate_id, item_id, metric_hash),
        )
        return self._evaluation_row(rows[0]).result() if rows else None

    def evaluations(
        self, run_id: str, *, candidate_id: str | None = None, split: str | None = None
    ) -> list[EvaluationRow]:
        """The run's evaluations in recording order, optionally of one candidate or split."""
        sql = "SELECT * FROM evaluations WHERE run_id = ?"
        params: list[Any] = [run_id]
        if candidate_id is not None:
            sql += " AND candidate_id = ?"
            params.append(candidate_id)
        if split is not None:
            sql += " AND split = ?"
            params.append(split)
        rows = self._query(sql + " ORDER BY seq", tuple(params))
        return [self._evaluation_row(r) for r in rows]

    def mean_scores(self, run_id: str, *, split: str) -> dict[str, float | None]:
        """candidate id → the mean score of its evaluations in `split`, over every metric its
        rows were scored by; an error (no score) is left out, and a candidate with only errors
        maps to None."""
        rows = self._query(
            "SELECT candidate_id, AVG(score) AS mean FROM evaluations "
            "WHERE run_id = ? AND split = ? GROUP BY candidate_id",
            (run_id, split),
        )
        return {r["candidate_id"]: r["mean"] for r in rows}

    # -- model calls ----------------------------------------------------------------------------

    def record_call(self, run_id: str, record: CallRecord) -> None:
        """Record one model call (any role) of a run; its request and reply texts are kept up
        to CALL_TEXT_BYTES each, the rest as their size and sha256."""
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO calls (run_id, seq, role, model, elapsed_ms, input_tokens, "
                    "output_tokens, cost_usd, cached, attempts, ok, error, item_id, created, "
                    "prompt, reply, measured) "
                    "SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                    "? "
                    "FROM calls WHERE run_id = ?",
                    (
                        run_id,
                        record.role,
                        record.model,
                        float(record.elapsed_ms),
                        int(record.input_tokens),
                        int(record.output_tokens),
                        record.cost_usd,
                        int(record.cached),
                        int(record.attempts),
                        int(record.ok),
                        record.error,
                        record.item_id,
                        _now(),
                        # Bounded here too, whatever made the record (skynet.models bounds
                        # each evaluation's texts together before they get here).
                        _text(kept_text(record.prompt, CALL_TEXT_BYTES)) or "",
                        _text(kept_text(record.reply, CALL_TEXT_BYTES)) or "",
                        int(record.measured),
                        run_id,
                    ),
                )
        except sqlite3.IntegrityError as exc:
            raise self._unknown_run(run_id) from exc

    _CALL_FIGURES = (
        "seq, created, role, model, elapsed_ms, input_tokens, output_tokens, cost_usd, cached, "
        "attempts, ok, error, item_id, measured"
    )

    @staticmethod
    def _call_record(r: sqlite3.Row, *, text: bool = False) -> CallRecord:
        return CallRecord(
            role=r["role"],
            model=r["model"],
            elapsed_ms=r["elapsed_ms"],
            input_tokens=r["input_tokens"],
            output_tokens=r["output_tokens"],
            cost_usd=r["cost_usd"],
            cached=bool(r["cached"]),
            attempts=r["attempts"],
            ok=bool(r["ok"]),
            error=r["error"],
            item_id=r["item_id"],
            prompt=r["prompt"] if text else "",
            reply=r["reply"] if text else "",
            measured=bool(r["measured"]),
        )

    def calls(self, run_id: str) -> list[CallRecord]:
        """The run's model calls in recording order (without their request and reply text)."""
        return [row.call for row in self.call_rows(run_id)]

    def call_rows(self, run_id: str) -> list[CallRow]:
        """The run's model calls with their seq and time, in recording order (without their
        request and reply text: `call` reads one with them)."""
        rows = self._query(
            f"SELECT {self._CALL_FIGURES} FROM calls WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return [
            CallRow(seq=r["seq"], created=r["created"], call=self._call_record(r)) for r in rows
        ]

    def call(self, run_id: str, seq: int) -> CallRow | None:
        """One model call with its request and reply text; None when the run has no such call."""
        rows = self._query("SELECT * FROM calls WHERE run_id = ? AND seq = ?", (run_id, seq))
        if not rows:
            return None
        r = rows[0]
        return CallRow(seq=r["seq"], created=r["created"], call=self._call_record(r, text=True))

    def stamp(self, run_id: str) -> str:
        """A short text that changes whenever anything of the run is recorded (the viewer
        reloads a page when it does)."""
        rows = self._query(
            "SELECT r.status, r.best_candidate_id, r.notes, "
            "(SELECT COUNT(*) || ':' || COALESCE(MAX(seq), 0) FROM evaluations WHERE run_id = r.id), "
            "(SELECT COUNT(*) FROM calls WHERE run_id = r.id), "
            "(SELECT COUNT(*) FROM candidates WHERE run_id = r.id), "
            "(SELECT COUNT(*) FROM proposals WHERE run_id = r.id) "
            "FROM runs r WHERE r.id = ?",
            (run_id,),
        )
        if not rows:
            raise self._unknown_run(run_id)
        parts = [str(v) for v in tuple(rows[0])]
        return hashlib.sha256("|".join(parts).encode("utf-8", "replace")).hexdigest()[:16]

    # -- items ------------------------------------------------------------------------------------

    def record_items(self, run_id: str, items: Iterable[tuple[str, Any]]) -> None:
        """Record the items a run was given, as (split, skynet.data.Item) pairs; an item already
        recorded is kept as it was (a resumed run was checked to have the same data)."""
        rows = [
            (run_id, item.id, split, _dumps(item.input), _dumps(item.expected), i)
            for i, (split, item) in enumerate(items, start=1)
        ]
        try:
            with self._transaction() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO items (run_id, item_id, split, input, expected, seq) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
        except sqlite3.IntegrityError as exc:
            raise self._unknown_run(run_id) from exc

    def items(self, run_id: str) -> dict[str, ItemRow]:
        """item id → the item as the run recorded it (empty for a run recorded before items
        were kept)."""
        rows = self._query("SELECT * FROM items WHERE run_id = ? ORDER BY seq", (run_id,))
        return {
            r["item_id"]: ItemRow(
                item_id=r["item_id"],
                split=r["split"],
                input=json.loads(r["input"]),
                expected=None if r["expected"] is None else json.loads(r["expected"]),
                seq=r["seq"],
            )
            for r in rows
        }

    def cost_by_role(self, run_id: str) -> dict[str, LedgerTotals]:
        """Totals of the run's model calls per role, the same sums a live Ledger makes.

        task, reflection and metric are always present. Tokens and cost_usd add the calls that
        were not served from the cache (a replay pays nothing and sends nothing); cost_usd counts
        failed calls too, at what they were counted at (failed_cost_usd: a kept reservation, an
        upper bound); unpriced_calls counts the calls with no known price, untokened_calls those
        whose reply reported no token usage.
        """
        rows = self._query(
            """
            SELECT role,
                COUNT(*) AS calls,
                SUM(ok = 0) AS failed_calls,
                SUM(ok = 1 AND cached = 1) AS cached_calls,
                SUM(CASE WHEN ok = 1 AND cached = 0 THEN input_tokens ELSE 0 END)
                    AS input_tokens,
                SUM(CASE WHEN ok = 1 AND cached = 0 THEN output_tokens ELSE 0 END)
                    AS output_tokens,
                SUM(CASE WHEN cached = 0 AND cost_usd IS NOT NULL
                    THEN cost_usd ELSE 0 END) AS cost_usd,
                SUM(ok = 1 AND cost_usd IS NULL) AS unpriced_calls,
                SUM(ok = 1 AND cached = 0 AND cost_usd IS NULL AND measured = 1
                    AND input_tokens = 0 AND output_tokens = 0) AS untokened_calls,
                SUM(measured = 0) AS unmeasured_calls,
                SUM(elapsed_ms) AS elapsed_ms,
                SUM(CASE WHEN ok = 0 AND cost_usd IS NOT NULL
                    THEN cost_usd ELSE 0 END) AS failed_cost_usd
            FROM calls WHERE run_id = ? GROUP BY role
            """,
            (run_id,),
        )
        empty = LedgerTotals(
            calls=0,
            failed_calls=0,
            cached_calls=0,
            input_tokens=0,
            output_tokens=0,
            cost_usd=0.0,
            unpriced_calls=0,
            elapsed_ms=0.0,
        )
        totals: dict[str, LedgerTotals] = dict.fromkeys(ROLES, empty)
        for r in rows:
            totals[r["role"]] = LedgerTotals(
                calls=int(r["calls"]),
                failed_calls=int(r["failed_calls"]),
                cached_calls=int(r["cached_calls"]),
                input_tokens=int(r["input_tokens"]),
                output_tokens=int(r["output_tokens"]),
                cost_usd=float(r["cost_usd"]),
                unpriced_calls=int(r["unpriced_calls"]),
                elapsed_ms=float(r["elapsed_ms"]),
                failed_cost_usd=float(r["failed_cost_usd"]),
                untokened_calls=int(r["untokened_calls"]),
                unmeasured_calls=int(r["unmeasured_calls"]),
            )
        return totals

    # -- proposals ------------------------------------------------------------------------------

    def record_proposal(
        self, run_id: str, *, parent_id: str | None, status: str, detail: str, text: str = ""
    ) -> None:
        """Record one proposal of the reflection step.

        Args:
            run_id: the run.
            parent_id: the candidate it was derived from.
            status: e.g. "accepted", "rejected", "empty", "failed".
            detail: why, in one line.
            text: the proposed text, when there was one.
        """
        try:
            with self._transaction() as db:
                db.execute(
                    "INSERT INTO proposals (run_id, seq, parent_id, status, detail, text, "
                    "created) SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ? "
                    "FROM proposals WHERE run_id = ?",
                    (run_id, parent_id, status, _text(detail), _text(text), _now(), run_id),
                )
        except sqlite3.IntegrityError as exc:
            raise self._unknown_run(run_id) from exc

    def forget_verdicts(self, run_id: str) -> int:
        """Drop the engine's verdicts on proposals (statuses in VERDICTS) before a resume: the
        resumed search judges every proposal again on the replayed evaluations, and a verdict
        made on evaluations an outage broke must not stand beside the new one. Returns how many
        were dropped."""
        marks = ", ".join("?" for _ in VERDICTS)
        return self._write(
            f"DELETE FROM proposals WHERE run_id = ? AND status IN ({marks})", (run_id, *VERDICTS)
        )

    def proposals(self, run_id: str) -> list[ProposalRow]:
        """The run's proposals in recording order."""
        rows = self._query("SELECT * FROM proposals WHERE run_id = ? ORDER BY seq", (run_id,))
        return [
            ProposalRow(
                seq=r["seq"],
                parent_id=r["parent_id"],
                status=r["status"],
                detail=r["detail"],
                text=r["text"],
                created=r["created"],
            )
            for r in rows
        ]
