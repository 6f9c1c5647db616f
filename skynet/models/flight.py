"""Identical calls in flight in two processes at once make one call, not two.

The call cache serves a reply once it is stored; until then, a process that misses the cache
while another process is making the same call would pay for it again (`skynet run --dry-run`
started beside a run samples the calls the run is making). Each call therefore holds a one-byte
POSIX record lock, at an offset taken from its cache key, on a file beside the cache: a twin call
in another process waits for it, then finds its reply in the cache. The lock is the kernel's: it
dies with the process, so a killed process never blocks the calls of another.

Within a process, the session's per-key thread lock comes first (POSIX record locks belong to the
process, not the thread). One descriptor per file per process, closed by the last call holding a
lock on it: closing any descriptor of a file drops every record lock the process holds on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

__all__ = ["KeyLocks", "cache_lock_path"]

_OFFSET_HEX = 15  # 60 bits of the key: distinct keys never share a byte in practice

# path -> [its descriptor, calls of this process holding or waiting for a lock on it]
_open: dict[str, list[int]] = {}
_unusable: set[str] = set()  # lock files that could not be opened (warned once)
_files_lock = threading.Lock()


def cache_lock_path(cache_path: str | Path) -> Path:
    """The lock file of a call cache: `cache.db` → `cache.db.lock` beside it."""
    path = Path(cache_path)
    return path.with_name(path.name + ".lock")


class KeyLocks:
    """Cross-process locks by cache key, on one file.

    Args:
        path: the lock file (beside the call cache); None for a cache no other process shares.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold the key's lock for the block: a twin call in another process waits."""
        entry = None if self.path is None else _enter(str(self.path))
        if entry is None:
            yield
            return
        offset = int(key[:_OFFSET_HEX], 16)
        try:
            fcntl.lockf(entry[0], fcntl.LOCK_EX, 1, offset)
            try:
                yield
            finally:
                fcntl.lockf(entry[0], fcntl.LOCK_UN, 1, offset)
        finally:
            _leave(str(self.path), entry)


def _enter(name: str) -> list[int] | None:
    """Count one more holder of the file, opening it for the first (None: it cannot be opened;
    the call goes unlocked)."""
    with _files_lock:
        entry = _open.get(name)
        if entry is None:
            if name in _unusable:
                return None
            try:
                entry = _open[name] = [os.open(name, os.O_RDWR | os.O_CREAT, 0o644), 0]
            except OSError as exc:
                _unusable.add(name)
                warnings.warn(
                    f"{name}: cannot open ({exc.strerror or exc}); a call made by two processes "
                    "at once may be paid twice",
                    stacklevel=4,
                )
                return None
        entry[1] += 1
        return entry


def _leave(name: str, entry: list[int]) -> None:
    """The last holder closes the file: no lock of this process is left on it to drop."""
    with _files_lock:
        entry[1] -= 1
        if entry[1] == 0:
            os.close(entry[0])
            del _open[name]
