"""A persistent cache of model calls, in SQLite, keyed by canonical JSON of the request.

A hit returns the reply together with the time, tokens and cost measured when the call was first
made, so a resumed or repeated run reports the same figures without paying again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skynet.storage import folder_error, is_damage, storage_error

__all__ = ["CachedCall", "CallCache", "cache_key", "open_cache_db"]

SCHEMA_VERSION = 1
# What moving a damaged cache aside costs: nothing recorded, only replies to ask for again.
_LOST = "nothing recorded is lost; what it held is asked for again"


def cache_key(model: str, messages: Any, params: dict[str, Any], draw: int) -> str:
    """sha256 of the canonical JSON of (model, messages, params, draw index)."""
    canonical = json.dumps(
        {"model": model, "messages": messages, "params": params, "draw": draw},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    # surrogatepass: a lone surrogate (odd model text fed back in) still makes a key.
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def open_cache_db(
    path: str | Path, *, what: str, schema_version: int, create: str
) -> sqlite3.Connection:
    """A cache database shared between threads (WAL, autocommit), its one table made on first use.

    Args:
        path: the database file (created with its folder), or ":memory:".
        what: the cache's name for messages, e.g. "call cache".
        schema_version: the version this code writes; a newer file is refused.
        create: the CREATE TABLE statement of version 1.

    Raises:
        ConfigError: the file was written by a newer Skynet.
        StorageError: the file is damaged, not a database, or cannot be made or written (the
            message names the file and the fix).
    """
    name = str(path)
    if name != ":memory:":
        try:
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise folder_error(Path(name).parent, exc, what=what) from None
    try:
        db = sqlite3.connect(name, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as exc:
        raise storage_error(name, exc, what=what, lost=_LOST) from None
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA busy_timeout=10000")
        db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version < 1:
            db.execute(create)
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (schema_version,)
            )
    except sqlite3.Error as exc:
        db.close()
        raise storage_error(name, exc, what=what, lost=_LOST) from None
    if version > schema_version:
        from skynet.errors import ConfigError

        db.close()
        raise ConfigError(
            f"{name}: {what} schema {version} is newer than this Skynet ({schema_version}); "
            "upgrade skynet or delete the file"
        )
    return db


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedCall:
    reply: dict[str, Any]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    elapsed_ns: int


def _reply_json(reply: dict[str, Any]) -> str:
    """The reply as JSON text SQLite can store: a lone surrogate (which UTF-8 cannot encode) is
    written as its \\u escape, which json.loads reads back as the same character."""
    text = json.dumps(reply, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(reply, ensure_ascii=True)
    return text


class CallCache:
    """SQLite-backed call cache; safe to share between threads.

    Args:
        path: the database file (created with its folder), or ":memory:".
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._damaged = False
        self._db = open_cache_db(
            path,
            what="call cache",
            schema_version=SCHEMA_VERSION,
            create=(
                "CREATE TABLE calls (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                "reply TEXT NOT NULL, input_tokens INTEGER, output_tokens INTEGER, "
                "cost_usd REAL, elapsed_ns INTEGER, created REAL DEFAULT (unixepoch('subsec')))"
            ),
        )

    def get(self, key: str) -> CachedCall | None:
        """The cached call, or None. A cache found damaged mid-run is a miss (said once, with
        the fix): the call is made again, and nothing the run records is lost."""
        with self._lock:
            if self._damaged:
                return None
            try:
                row = self._db.execute(
                    "SELECT reply, input_tokens, output_tokens, cost_usd, elapsed_ns "
                    "FROM calls WHERE key=?",
                    (key,),
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                if not is_damage(exc):
                    raise
                self._damaged = True
                warnings.warn(
                    str(storage_error(self.path, exc, what="call cache", lost=_LOST)),
                    RuntimeWarning,
                    stacklevel=2,
                )
                return None
        if row is None:
            return None
        return CachedCall(
            reply=json.loads(row[0]),
            input_tokens=row[1],
            output_tokens=row[2],
            cost_usd=row[3],
            elapsed_ns=row[4],
        )

    def put(self, key: str, model: str, call: CachedCall) -> None:
        with self._lock:
            if self._damaged:
                return
            self._db.execute(
                "INSERT OR IGNORE INTO calls (key, model, reply, input_tokens, output_tokens, "
                "cost_usd, elapsed_ns) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    model,
                    _reply_json(call.reply),
                    call.input_tokens,
                    call.output_tokens,
                    call.cost_usd,
                    call.elapsed_ns,
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
