"""The governor: per-model limits on concurrent calls and on requests per minute."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from time import monotonic as _monotonic
from time import sleep as _sleep

__all__ = ["Governor"]


class Governor:
    """Caps one model's concurrent calls and spaces request starts to honour an RPM limit.

    Args:
        max_concurrent: calls allowed in flight at once.
        rpm: requests per minute (None: no rate limit). Starts are spaced 60/rpm seconds apart.
    """

    def __init__(self, max_concurrent: int = 8, rpm: float | None = None) -> None:
        if max_concurrent < 1:
            raise ValueError("max_concurrent must be >= 1")
        self.max_concurrent = max_concurrent
        self.rpm = rpm
        self._slots = threading.BoundedSemaphore(max_concurrent)
        self._lock = threading.Lock()
        self._next_start = 0.0
        self._in_flight = 0
        self.peak_in_flight = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[float]:
        """Hold one call slot; yields the seconds spent waiting for it."""
        waited = self.acquire()
        try:
            yield waited
        finally:
            self.release()

    def acquire(self) -> float:
        """Take one call slot (waiting for it, and for the RPM spacing); returns the seconds
        waited. Pair with release(); slot() does both."""
        began = _monotonic()
        self._slots.acquire()
        try:
            if self.rpm:
                with self._lock:
                    now = _monotonic()
                    start = max(now, self._next_start)
                    self._next_start = start + 60.0 / self.rpm
                if start > now:
                    _sleep(start - now)
            with self._lock:
                self._in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        except BaseException:
            self._slots.release()
            raise
        return _monotonic() - began

    def release(self) -> None:
        """Give back a slot acquire() took."""
        with self._lock:
            self._in_flight -= 1
        self._slots.release()
