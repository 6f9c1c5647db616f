"""What user code prints while Skynet calls it, kept per call instead of mixed into the report.

`contextlib.redirect_stdout` swaps `sys.stdout` for the whole process, and metric calls run on
several threads at once: one call's output would land in another's buffer, or the report's in
a call's. Here `sys.stdout` and `sys.stderr` are, while any call is capturing, routers that send
each write to the buffer of the call running in the writing thread (a context variable says
which), and every other write to the stream they replaced. Both streams go to the one buffer, in
the order written (a warning or a traceback the metric prints itself included). The routers are
removed when the last capture ends.

Not captured: a thread the user's code starts itself does not carry the context (what it prints
goes to the terminal as before), and writes to the file descriptors themselves (os.write(1, ...),
a C extension's printf, a subprocess) bypass sys.stdout.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

__all__ = ["Printed", "capturing"]

_CURRENT: contextvars.ContextVar[Printed | None] = contextvars.ContextVar(
    "skynet_printed", default=None
)


class Printed:
    """The text one call printed, kept up to `limit` characters (the rest counted, not kept).

    Safe to read from another thread while the call still runs (an abandoned, hung metric).
    """

    def __init__(self, limit: int = 4000) -> None:
        self.limit = limit
        self._parts: list[str] = []
        self._kept = 0
        self._dropped = 0
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            room = self.limit - self._kept
            if room > 0:
                self._parts.append(text[:room])
                self._kept += min(room, len(text))
            self._dropped += max(0, len(text) - max(room, 0))

    def text(self) -> str:
        """What was printed ("" for nothing), with a note when it was cut."""
        with self._lock:
            kept = "".join(self._parts)
            if self._dropped:
                kept += f"\n… [cut: {self._dropped} more character(s) printed]"
            return kept


class _Router:
    """sys.stdout (or sys.stderr) while captures run: a capturing thread's writes go to its
    Printed, the rest to the stream it replaced. Everything else (encoding, fileno, isatty) is
    that stream's."""

    def __init__(self, target: TextIO) -> None:
        self._target = target

    def write(self, text: str) -> int:
        printed = _CURRENT.get()
        if printed is None:
            return self._target.write(text)
        printed.write(text)
        return len(text)

    def flush(self) -> None:
        if _CURRENT.get() is None:
            self._target.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


_STREAMS = ("stdout", "stderr")
_lock = threading.Lock()
_depth = 0
_routers: dict[str, _Router] = {}


def _install() -> None:
    global _depth
    with _lock:
        for name in _STREAMS:
            current = getattr(sys, name)
            if _depth == 0 or current is not _routers.get(name):
                _routers[name] = _Router(current)
                setattr(sys, name, _routers[name])
        _depth += 1


def _uninstall() -> None:
    global _depth
    with _lock:
        _depth = max(0, _depth - 1)
        if _depth == 0:
            for name, router in _routers.items():
                if getattr(sys, name) is router:  # else someone replaced it since: theirs stands
                    setattr(sys, name, router._target)
            _routers.clear()


@contextmanager
def capturing(printed: Printed) -> Iterator[Printed]:
    """Within the block, what this thread (and its context) prints goes to `printed`."""
    _install()
    token = _CURRENT.set(printed)
    try:
        yield printed
    finally:
        _CURRENT.reset(token)
        _uninstall()
