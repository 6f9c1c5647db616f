"""One writer per project: the lock that `skynet run`, `eval` and `rescore` hold on `.skynet/`.

Two writers at once would each pay for every call and record it twice (two runs in one project
sent 80 requests for 40 replies). A writer holds an exclusive `flock` on `.skynet/run.lock` for
its whole lifetime; a second writer is refused before it spends or records anything, with one
line naming the run that holds the lock and its process id. The lock is the kernel's and dies with
its process, so a run killed with SIGKILL leaves no stale lock: the file's text (the holder's run,
pid and command) only says who holds it, never whether it is held.

Readers (`show`, `runs`, `check`, `run --dry-run`) take no lock: SQLite in WAL mode lets them read
while a writer writes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from skynet.errors import ConfigError, ProjectBusy
from skynet.storage import folder_error

__all__ = ["LOCK_FILE", "ProjectBusy", "Writer", "lock_path", "one_writer", "writing"]

LOCK_FILE = "run.lock"
# The holder writes its record right after it locks; a reader that finds none yet looks again.
_READ_TRIES = 20
_READ_PAUSE_S = 0.025
_RECORD_BYTES = 512  # written in one write at offset 0, padded: a reader never sees half of it

# What each command is called in the refusal line.
_DOING = {
    "run": "running",
    "resume": "running (resumed)",
    "eval": "recording an evaluation",
    "rescore": "being rescored",
}


def lock_path(store_dir: Path) -> Path:
    """`run.lock` in the store folder (a project's `.skynet`): beside the run store."""
    return Path(store_dir) / LOCK_FILE


class Writer:
    """The held lock of one writer. `names(run_id)` records the run it writes, for the refusal
    line another writer sees."""

    def __init__(self, path: Path, fd: int, command: str, run_id: str | None) -> None:
        self.path = path
        self._fd = fd
        self._record: dict[str, Any] = {
            "pid": os.getpid(),
            "command": command,
            "run": run_id,
            "since": datetime.now().astimezone().isoformat(timespec="seconds"),
        }
        self._write()

    def names(self, run_id: str) -> None:
        """Say which run this writer writes (a new run has its id only once its row exists)."""
        self._record["run"] = run_id
        self._write()

    def _write(self) -> None:
        text = json.dumps(self._record).encode("utf-8")
        os.pwrite(self._fd, text.ljust(_RECORD_BYTES), 0)

    def release(self) -> None:
        if self._fd < 0:
            return
        # Cleared while still held: a later holder's record is never wiped by this one.
        with contextlib.suppress(OSError):
            os.pwrite(self._fd, b" " * _RECORD_BYTES, 0)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = -1


@contextlib.contextmanager
def one_writer(store_dir: Path, *, command: str, run_id: str | None = None) -> Iterator[Writer]:
    """Hold the project's writer lock for the block; refuse at once if another process holds it.

    Args:
        store_dir: the folder holding runs.db (a project's `.skynet`).
        command: what writes: run, resume, eval or rescore (named in the refusal line).
        run_id: the run written, when known already (a resume, a rescore).

    Raises:
        ProjectBusy: another writer holds the lock; the message names its run and process id.
        ConfigError: the lock file cannot be opened (e.g. `.skynet` is not writable).
    """
    path = lock_path(store_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise folder_error(path.parent, exc, what="run lock") from None
    try:
        # Not inherited by children (O_CLOEXEC is Python's default): a sandbox or tool started
        # by the run must not keep the lock alive after the run died.
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot open the run lock ({exc.strerror or exc}); make {path.parent} a "
            "folder Skynet can write, holding no folder of that name"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise ConfigError(f"{path}: cannot lock the run lock ({exc.strerror or exc})") from None
        raise ProjectBusy(_refusal(path)) from None
    writer = Writer(path, fd, command, run_id)
    try:
        yield writer
    finally:
        writer.release()


def writing(store_dir: Path, run_id: str) -> bool:
    """Whether a live process is writing `run_id` now (its writer's record names it).

    A run marked `running` that no process writes was killed, or its process exited (a metric
    that called os._exit): `skynet run --resume` goes on from what was recorded.
    """
    try:
        text = lock_path(store_dir).read_bytes().strip()
        record = json.loads(text) if text else None
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("run") == run_id
        and isinstance(record.get("pid"), int)
        and _alive(record["pid"])
    )


def _refusal(path: Path) -> str:
    holder = _holder(path)
    if holder is None:
        return (
            f"another process holds {path}; one writer per project: wait for it to end, "
            "then try again"
        )
    pid, run = holder["pid"], holder.get("run")
    doing = _DOING.get(str(holder.get("command")), "running")
    since = str(holder.get("since") or "")[11:19]  # the clock time of an ISO timestamp
    when = f" (since {since})" if since else ""
    starting = "an evaluation" if holder.get("command") == "eval" else "a run"
    what = f"run {run} is {doing}" if run else f"{starting} is starting"
    return (
        f"{what} in process {pid}{when}; one writer per project: wait for it to end or stop it "
        f"(kill {pid}), then try again"
    )


def _holder(path: Path) -> dict[str, Any] | None:
    """The holder's record, once it has written it (None: not readable in time)."""
    for _ in range(_READ_TRIES):
        try:
            text = path.read_bytes().strip()
            record = json.loads(text) if text else None
        except (OSError, ValueError):
            record = None
        # A dead pid is the record of a holder killed before it could clear it: the new holder
        # has not written its own yet.
        if (
            isinstance(record, dict)
            and isinstance(record.get("pid"), int)
            and _alive(record["pid"])
        ):
            return record
        time.sleep(_READ_PAUSE_S)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
