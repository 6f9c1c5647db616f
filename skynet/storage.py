"""What a SQLite file under .skynet that cannot be used says to the user, in one line.

The run store (`.skynet/runs.db`) and the caches (`.skynet/cache.db`, the embedding cache) meet
the same faults: a damaged file, a file that is no database, a folder where the file should be
(or a file where the folder should be), a file that cannot be written, a lock held too long.
Each becomes a StorageError naming the file and the fix; damage is never advised as a lock.
"""

from __future__ import annotations

from pathlib import Path

from skynet.errors import StorageError

__all__ = ["DAMAGE", "folder_error", "is_damage", "is_fault", "storage_error"]

# SQLite's names for a file that is not (or no longer) a readable database. IOERR_SHORT_READ is a
# file cut short (truncated mid-page).
DAMAGE = ("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_IOERR_SHORT_READ")
_DAMAGE_TEXT = ("malformed", "not a database", "file is encrypted")


def _errorname(exc: BaseException) -> str:
    return str(getattr(exc, "sqlite_errorname", "") or "")


def is_damage(exc: BaseException) -> bool:
    """Whether a sqlite3 error says the file itself is damaged (not locked, not unwritable)."""
    name = _errorname(exc)
    return name.startswith(DAMAGE) or any(t in str(exc) for t in _DAMAGE_TEXT)


# What a file, not the SQL, can be at fault for: anything else (SQLITE_ERROR: a statement that
# does not fit the schema) is a bug in Skynet and keeps its traceback.
_FAULTS = (
    *DAMAGE,
    "SQLITE_IOERR",
    "SQLITE_BUSY",
    "SQLITE_LOCKED",
    "SQLITE_READONLY",
    "SQLITE_CANTOPEN",
    "SQLITE_FULL",
    "SQLITE_PERM",
    "SQLITE_AUTH",
)


def is_fault(exc: BaseException) -> bool:
    """Whether a sqlite3 error is the file's (damaged, locked, unwritable, disk full), not the
    SQL's: only those become a StorageError."""
    return _errorname(exc).startswith(_FAULTS) or is_damage(exc)


def _one_line(exc: BaseException) -> str:
    # quick_check reports over several lines ("*** in database main ***\nPage 6: ...").
    text = str(exc).replace("*** in database main ***", "")
    return " ".join(text.split()).replace(": Page", ": page")


def _aside(path: Path) -> str:
    return f"mv {path} {path}.bad"


def storage_error(path: str | Path, exc: BaseException, *, what: str, lost: str) -> StorageError:
    """The StorageError for a sqlite3 error on the file `path`.

    Args:
        path: the database file.
        exc: the sqlite3 (or OS) error.
        what: the file's name in the message, e.g. "run store", "call cache".
        lost: what moving the file aside costs, e.g. "the calls it holds are made again".
    """
    p = Path(path)
    name = _errorname(exc)
    if name.startswith("SQLITE_NOTADB") or "not a database" in str(exc):
        return StorageError(
            f"{p} is not a {what}, or is damaged ({exc}); move it aside ({_aside(p)}) and run "
            f"again: Skynet makes a new one ({lost})"
        )
    if is_damage(exc):
        return StorageError(
            f"{p}: the {what} is damaged ({_one_line(exc)}); move it aside ({_aside(p)}) and run "
            f"again: Skynet makes a new one ({lost})"
        )
    if p.is_dir():
        return StorageError(
            f"{p}: the {what} is a folder, not a file; move it aside ({_aside(p)}) and run again"
        )
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in str(exc):
        return StorageError(
            f"{p}: the {what} is locked by another process ({exc}); wait for it to end, or stop "
            "it, and run again"
        )
    if name.startswith("SQLITE_FULL"):
        return StorageError(f"{p}: the disk is full ({exc}); free some space and run again")
    if name.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return StorageError(
            f"{p}: cannot open the {what} for writing ({exc}); make {p.parent} and the file "
            "writable by this user"
        )
    return StorageError(
        f"{p}: cannot read or write the {what} ({exc}); check the disk and the file's "
        f"permissions, or move it aside ({_aside(p)}) and run again"
    )


def folder_error(folder: str | Path, exc: OSError, *, what: str) -> StorageError:
    """The StorageError for a folder that holds a database but cannot be made."""
    f = Path(folder)
    # The file in the way may be any ancestor (.skynet a file, cache_path under it).
    blocker = next((a for a in (f, *f.parents) if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        f = blocker
        return StorageError(
            f"{f} is a file, not a folder, so the {what} cannot be kept in it; move it aside "
            f"({_aside(f)}) and run again"
        )
    return StorageError(
        f"cannot create the folder {f} for the {what} ({exc.strerror or exc}); make the project "
        "folder writable by this user"
    )
