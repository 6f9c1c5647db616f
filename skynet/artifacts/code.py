"""The code artifact: code.py defines `run(input) -> output`; the engine evolves its source.

Each evaluation runs the candidate in a separate Python process: isolated mode (`python -I`), a
scratch working directory, an environment with nothing but PATH (no API keys), a time limit, an
address-space limit (RLIMIT_AS), a process-count limit, and — when Skynet runs as root — the
unprivileged user `nobody` (the harness drops to it before it reads the candidate), so the
process-count limit binds and the parent's files stay out of reach. The meter times the child from the parent, so nothing the candidate does moves the figure.

A candidate that crashes, hangs, runs out of memory or returns something that is not JSON is an
item error; the tail of its stderr reaches the reflection model as feedback. The run goes on.
"""

from __future__ import annotations

import ast
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skynet.errors import CandidateFailed, ConfigError

__all__ = ["CodeArtifact", "CodeFailed", "load_code", "COMPONENT"]

COMPONENT = "code"
_NOBODY = 65534
_STDERR_TAIL = 1500

# Runs inside the child: load the candidate from code.py, call run(input), write the output.
_HARNESS = r"""
import json, os, sys, traceback
# The standard library a candidate may want, loaded before the privileges go (as nobody the
# interpreter's own folder may be unreadable).
import bisect, collections, dataclasses, datetime, decimal, fractions, functools, heapq
import itertools, math, operator, random, re, statistics, string, time, typing
if os.environ.get("SKYNET_DROP_TO"):
    uid = int(os.environ.pop("SKYNET_DROP_TO"))
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
source = open("code.py", encoding="utf-8").read()
namespace = {"__name__": "candidate"}
try:
    exec(compile(source, "code.py", "exec"), namespace)
except BaseException:
    traceback.print_exc()
    sys.exit(3)
run = namespace.get("run")
if not callable(run):
    print("code.py defines no run(input) function", file=sys.stderr)
    sys.exit(4)
data = json.loads(open("input.json", encoding="utf-8").read())
try:
    result = run(data)
except BaseException:
    traceback.print_exc()
    sys.exit(5)
try:
    text = json.dumps({"output": result})
except (TypeError, ValueError) as exc:
    print(f"run() returned {type(result).__name__}, which is not JSON: {exc}", file=sys.stderr)
    sys.exit(6)
open("output.json", "w", encoding="utf-8").write(text)
"""


class CodeFailed(CandidateFailed):
    """A candidate failed on one item (crash, time-out, memory, bad output): an item error."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeArtifact:
    """A loaded code.py and the limits each run of a candidate is held to."""

    source: str
    path: Path | None = None
    timeout_s: float = 10.0
    memory_mb: int = 1024
    max_processes: int = 64

    @property
    def components(self) -> dict[str, str]:
        return {COMPONENT: self.source}

    def run(self, candidate: dict[str, str], input: dict[str, Any]) -> Any:
        """Run `candidate` on one input in a sandboxed child process; return its output.

        Raises:
            CodeFailed: the candidate crashed, hung, ran out of memory, or returned non-JSON.
        """
        scratch = Path(tempfile.mkdtemp(prefix="skynet-code-"))
        try:
            (scratch / "code.py").write_text(candidate[COMPONENT], encoding="utf-8")
            (scratch / "input.json").write_text(json.dumps(input), encoding="utf-8")
            drop = os.geteuid() == 0
            if drop:
                os.chmod(scratch, 0o777)  # noqa: S103 — the child runs as nobody in its own dir
                for name in ("code.py", "input.json"):
                    os.chmod(scratch / name, 0o644)
            env = {"PATH": "/usr/bin:/bin", "HOME": str(scratch), "PYTHONHASHSEED": "0"}
            if drop:
                env["SKYNET_DROP_TO"] = str(_NOBODY)
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _HARNESS],
                cwd=scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: a time-out kills them all
                preexec_fn=self._limits(),  # noqa: PLW1509 — limits must be set in the child
            )
            try:
                _, err = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                _, err = proc.communicate()
                raise CodeFailed(
                    f"the candidate ran longer than {self.timeout_s:g} s and was killed"
                    + _tail(err)
                ) from None
            finally:
                _kill_group(proc)  # children it left behind
            if proc.returncode != 0:
                raise CodeFailed(_why(proc.returncode, self.memory_mb) + _tail(err))
            try:
                return json.loads((scratch / "output.json").read_text(encoding="utf-8"))["output"]
            except (OSError, ValueError, KeyError):
                raise CodeFailed("the candidate wrote no output" + _tail(err)) from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _limits(self) -> Any:
        memory = self.memory_mb * 1024 * 1024
        processes = self.max_processes

        def apply() -> None:  # runs in the child between fork and exec
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            # Binds once the harness has become nobody (root is exempt from it).
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        return apply

    def render(self, candidate: dict[str, str]) -> str:
        return candidate[COMPONENT]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the candidate's process group until nothing is left in it (a fork bomb's children
    may still be forking when the first signal lands)."""
    for _ in range(200):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.poll()  # reap the leader: a zombie still counts as a member of the group
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.005)


def _why(code: int, memory_mb: int) -> str:
    if code == 3:
        return "code.py failed to load (syntax or import error)"
    if code == 4:
        return "code.py defines no run(input) function"
    if code == 5:
        return "run(input) raised an exception"
    if code == 6:
        return "run(input) returned something that is not JSON"
    if code < 0:
        name = signal.Signals(-code).name
        return f"the candidate was killed by {name}"
    if code == 1:
        return f"the candidate failed (exit 1; a MemoryError means it went past {memory_mb} MB)"
    return f"the candidate exited with status {code}"


def _tail(err: bytes | None) -> str:
    text = (err or b"").decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    if len(text) > _STDERR_TAIL:
        text = "…" + text[-_STDERR_TAIL:]
    return f"; stderr:\n{text}"


def load_code(path: Path, *, timeout_s: float, memory_mb: int) -> CodeArtifact:
    """Read code.py (the seed candidate) and check it defines run().

    Raises:
        ConfigError: the file is missing, does not parse, or defines no run function.
    """
    if not path.is_file():
        raise ConfigError(f"{path}: no such code file; set [artifact] path in skynet.toml")
    source = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    if not any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "run"
        for node in tree.body
    ):
        raise ConfigError(f"{path}: defines no run(input) function; the code artifact calls it")
    return CodeArtifact(source=source, path=path, timeout_s=timeout_s, memory_mb=memory_mb)
