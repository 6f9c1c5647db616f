"""The model proxy, the one channel out of the sandbox: the parent serves the candidate's
`skynet_sandbox.complete(...)` calls on a Unix socket in /skynet, each request checked and
bounded before it reaches skynet.models.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ALLOWED_PARAMS = ("max_tokens", "temperature", "top_p", "stop", "seed")
# One request's JSON line. 1 MiB is ~256k tokens of English text at ~4 bytes a token: more
# than the context window of most hosted models (128k-200k tokens), which refuse a longer
# request anyway; each byte accepted is reserved against the budget and may be kept in runs.db.
_MAX_REQUEST_BYTES = 1 << 20
_MAX_CONNECTIONS = 8  # model-proxy connections served at once, per evaluation
# Private switch for tests (the control of the in-flight attack): False leaves the calls a
# candidate left in flight running past its evaluation, as before. Never set it in Skynet.
_JOIN_SERVED = True


@dataclass(kw_only=True)
class ModelProxy:
    """Serves the candidate's model calls on a Unix socket inside the sandbox.

    `call(messages, params)` makes one call (the caller makes it through skynet.models, in the
    item's context) and returns a dict with "text", "input_tokens", "output_tokens" and
    "finish_reason". An exception from it is sent to the candidate as an error and kept in
    `errors`, so the caller can decide whose fault the item was.
    """

    call: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]]
    max_calls: int = 64
    calls: int = 0
    errors: list[BaseException] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            return {"error": "the request is not JSON"}
        if not isinstance(request, dict):
            return {"error": "the request must be a JSON object"}
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            return {"error": "messages must be a non-empty list of {role, content} objects"}
        for message in messages:
            if (
                not isinstance(message, dict)
                or message.get("role") not in ("system", "user", "assistant")
                or not isinstance(message.get("content"), str)
            ):
                return {
                    "error": "each message must be {'role': 'system'|'user'|'assistant', "
                    "'content': str}"
                }
        params = {k: request[k] for k in _ALLOWED_PARAMS if request.get(k) is not None}
        unknown = sorted(set(request) - {"messages", *_ALLOWED_PARAMS})
        if unknown:
            return {"error": f"unknown parameter(s) {unknown}; allowed: {list(_ALLOWED_PARAMS)}"}
        wrong = _invalid_params(params)
        if wrong:
            # Refused here, never sent: a request the model would refuse must not reach it, or
            # the candidate could turn an item it cannot answer into the model's error.
            return {"error": wrong}
        with self._lock:
            if self.calls >= self.max_calls:
                return {"error": f"more than {self.max_calls} model calls in one evaluation"}
            self.calls += 1
        clean = [{"role": m["role"], "content": m["content"]} for m in messages]
        try:
            return self.call(clean, params)
        except Exception as exc:  # reported to the candidate; the caller decides whose fault
            with self._lock:
                self.errors.append(exc)
            return {"error": f"{type(exc).__name__}: {exc}"}


def _invalid_params(params: Mapping[str, Any]) -> str:
    """Why the candidate's call parameters cannot be sent ("" when they can): each a finite
    number in its range, stop a string or up to 4 strings, seed a 64-bit integer."""

    def number(name: str, low: float, high: float) -> str:
        value = params.get(name)
        if value is None:
            return ""
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            return f"{name} must be a finite number from {low:g} to {high:g}, not {value!r}"
        return ""

    for name, low, high in (("temperature", 0.0, 2.0), ("top_p", 0.0, 1.0)):
        why = number(name, low, high)
        if why:
            return why
    for name, low, high in (("max_tokens", 1, 2**31 - 1), ("seed", -(2**63), 2**63 - 1)):
        value = params.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high
        ):
            return f"{name} must be an integer from {low} to {high}, not {value!r}"
    stop = params.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if (
            not isinstance(stops, list)
            or not 1 <= len(stops) <= 4
            or not all(isinstance(s, str) and s for s in stops)
        ):
            return f"stop must be a non-empty string or a list of 1 to 4 of them, not {stop!r}"
    return ""


@contextlib.contextmanager
def _serving(proxy: ModelProxy | None, path: Path) -> Iterator[None]:
    if proxy is None:
        yield
        return
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    os.chmod(path, 0o666)  # connecting needs write access: the candidate's uid is not Skynet's
    server.listen(8)
    stop = threading.Event()
    # A candidate may open sockets by the thousand: Skynet serves a few at a time, the rest wait.
    slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
    # The connections being served: joined when the sandbox is gone, so a call the candidate
    # left in flight ends (and is metered, and in the ledger) before the evaluation does.
    served: list[tuple[threading.Thread, socket.socket]] = []

    def connection(conn: socket.socket) -> None:
        try:
            serve(conn)
        finally:
            slots.release()

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(None)
            reader = conn.makefile("rb")
            while not stop.is_set():
                line = reader.readline(_MAX_REQUEST_BYTES + 1)
                if not line or stop.is_set():  # the sandbox is gone: no new call is started
                    return
                if len(line) > _MAX_REQUEST_BYTES:
                    reply: dict[str, Any] = {
                        "error": f"a model request of more than {_MAX_REQUEST_BYTES:,} bytes "
                        f"(1 MiB, ~256k tokens: past most models' context window) is refused; "
                        "send a shorter prompt"
                    }
                    conn.sendall((json.dumps(reply) + "\n").encode())
                    return
                reply = proxy.handle(line)
                try:
                    conn.sendall((json.dumps(reply, ensure_ascii=True) + "\n").encode())
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            if not slots.acquire(timeout=0.5):
                continue
            try:
                conn, _ = server.accept()
            except OSError:
                slots.release()
                return
            worker = threading.Thread(target=connection, args=(conn,), daemon=True)
            served.append((worker, conn))
            worker.start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join()
        # No request is read from now on (a process the kill missed cannot start one); the
        # one a connection is serving runs to its end (the model's time-out bounds it).
        for _, conn in served:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RD)
        for worker, _ in served if _JOIN_SERVED else ():
            worker.join()
