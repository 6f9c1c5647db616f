"""Reading one run: hand the harness "go", read its output and stderr bounded, each with a
deadline, and measure its time and CPU from the parent (never from the harness, which the
candidate controls).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import time
from time import perf_counter_ns as _clock_ns
from typing import Any

from skynet.sandbox._bwrap import _kill
from skynet.sandbox._cgroups import _Cgroup, _cpu_sample, _over, _tree
from skynet.sandbox._limits import Limits, Outcome


def _watch(
    proc: subprocess.Popen[bytes],
    out_fd: int,
    limits: Limits,
    cgroup: _Cgroup | None,
    ours: int,
) -> Outcome:
    """Hand the harness "go", read its output and stderr bounded, each with a deadline."""
    assert proc.stderr is not None and proc.stdin is not None
    err_fd = proc.stderr.fileno()
    os.set_blocking(out_fd, False)
    os.set_blocking(err_fd, False)
    sel = selectors.DefaultSelector()
    sel.register(out_fd, selectors.EVENT_READ, "out")
    sel.register(err_fd, selectors.EVENT_READ, "err")
    out = bytearray()
    tail = bytearray()
    ready = False
    failure = ""
    go_ns = end_ns = 0
    deadline = time.monotonic() + limits.startup_s
    open_fds = {"out", "err"}
    # Without a cgroup, the parent samples the sandbox's processes and memory every 20 ms.
    sample = cgroup is None
    # The CPU time of the candidate's tree, measured here (never reported by the harness, which
    # the candidate controls): the cgroup's counter where there is one, the tree sampled with
    # the limits above, and the exit's rusage (its waited-for descendants), less what the
    # tree had used at "go" (the interpreter's start-up).
    seen: dict[tuple[int, str], int] = {}
    at_go = 0
    rusage_ns = 0
    try:
        while "out" in open_fds:
            left = deadline - time.monotonic()
            if left <= 0:
                failure = (
                    f"the candidate ran longer than {limits.wall_s:g} s and was killed"
                    if ready
                    else f"the sandbox did not start within {limits.startup_s:g} s"
                )
                break
            if sample and ready:
                pids = _tree(proc.pid)
                _cpu_sample(pids, seen)
                failure = _over(proc.pid, limits, ours, pids)
                if failure:
                    break
            for key, _ in sel.select(timeout=min(left, 0.02 if sample else 1.0)):
                chunk = _read(key.fd)
                if chunk is None:
                    continue
                if key.data == "err":
                    if chunk:
                        tail += chunk
                        if len(tail) > limits.stderr_tail_bytes:
                            del tail[: len(tail) - limits.stderr_tail_bytes]
                    else:
                        sel.unregister(err_fd)
                        open_fds.discard("err")
                    continue
                if not chunk:
                    end_ns = _clock_ns()
                    sel.unregister(out_fd)
                    open_fds.discard("out")
                    if not ready:
                        failure = "the sandbox ended before it was ready"
                    break
                if not ready:
                    if chunk[:1] != b"R":
                        failure = "the sandbox harness did not start"
                        break
                    ready = True
                    chunk = chunk[1:]
                    if cgroup is not None and not cgroup.attach(_tree(proc.pid)):
                        failure = "the sandbox could not be placed in its cgroup"
                        break
                    _cpu_sample(_tree(proc.pid), seen)
                    at_go = sum(seen.values())
                    go_ns = _clock_ns()
                    try:
                        proc.stdin.write(b"G")
                        proc.stdin.close()
                    except OSError:
                        pass
                    deadline = time.monotonic() + limits.wall_s
                out += chunk
                if len(out) > limits.max_output_bytes:
                    failure = (
                        f"the output passed {limits.max_output_bytes:,} bytes "
                        "([artifact] max_output_bytes) and was not read further"
                    )
                    break
            if failure:
                break
        if not failure:
            # The output is complete; the harness exits now. Give it a moment, not the wall time.
            rusage_ns = _reap(proc, 2.0)
    finally:
        sel.close()
    if end_ns == 0:
        end_ns = _clock_ns()
    _kill(proc)
    # What stderr still holds (bounded): the traceback of a crash arrives just before the exit.
    with contextlib.suppress(OSError):
        for _ in range(64):
            chunk = _read(err_fd)
            if not chunk:
                break
            tail += chunk
            if len(tail) > limits.stderr_tail_bytes:
                del tail[: len(tail) - limits.stderr_tail_bytes]
    code = proc.returncode
    oom = cgroup.oom() if cgroup is not None else False
    counted = cgroup.cpu_ns() if cgroup is not None else None
    cpu_ns = max(counted or 0, sum(seen.values()) - at_go, rusage_ns - at_go, 0) if go_ns else 0
    parsed, has_output, problem = None, False, ""
    if not failure and out:
        parsed, problem = bounded_json(bytes(out), limits.max_output_depth)
        has_output = not problem
    text = tail.decode("utf-8", "replace")
    if len(tail) >= limits.stderr_tail_bytes:
        text = "…" + text
    return Outcome(
        output=parsed,
        has_output=has_output,
        failure=failure or problem,
        returncode=code,
        stderr_tail=text,
        run_ns=max(0, end_ns - go_ns) if go_ns else 0,
        cpu_ns=cpu_ns,
        oom=oom,
        started=ready,
    )


def _reap(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait up to `timeout` s for the sandbox's first process to exit and reap it with
    wait4; the CPU ns its rusage holds (its own and its waited-for descendants'), or 0."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return int((usage.ru_utime + usage.ru_stime) * 1e9)
        left = deadline - time.monotonic()
        if left <= 0:
            return 0
        time.sleep(min(delay, left))
        delay = min(delay * 2, 0.05)


def _read(fd: int) -> bytes | None:
    """Up to 64 KiB from a non-blocking pipe: b"" at its end, None when nothing is there yet."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def bounded_json(data: bytes, max_depth: int) -> tuple[Any, str]:
    """Parse JSON text whose nesting is at most `max_depth`; (value, "") or (None, why)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > max_depth:
                    return None, f"the output nests deeper than {max_depth} levels"
        elif byte in (0x5D, 0x7D):
            depth -= 1
    try:
        return json.loads(data.decode("utf-8")), ""
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, "the candidate's output was not valid JSON"
