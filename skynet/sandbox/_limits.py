"""What one sandboxed evaluation may use (`Limits`) and how it ended (`Outcome`): the two records
every part of the sandbox shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one evaluation may use. Each limit hit is a candidate error naming it.

    Attributes:
        wall_s: wall time of the candidate's run (from "go" to the end of its output).
        cpu_s: CPU time per process (RLIMIT_CPU).
        memory_mb: address space per process (RLIMIT_AS), and the whole sandbox's memory where a
            cgroup can be made.
        max_processes: processes in the sandbox (cgroup pids.max, else RLIMIT_NPROC, which binds
            inside the user namespace of an unprivileged Skynet).
        max_file_mb: the largest file the candidate may write (RLIMIT_FSIZE).
        tmpfs_mb: the size of its private /tmp and of its /dev/shm, its only writable folders.
        max_output_bytes: the largest output (its JSON) the parent reads.
        max_output_depth: the deepest nesting of lists and dicts the output may hold.
        stderr_tail_bytes: how much of the end of stderr the parent keeps.
        startup_s: how long the sandbox may take to start before it counts as broken.
        max_model_calls: model calls through the proxy per evaluation.
        packages: the top-level names of installed packages the candidate may import (None:
            every one in `site_folders()`; the standard library always).
    """

    wall_s: float = 10.0
    cpu_s: float | None = None  # None: the wall time, rounded up
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 64
    tmpfs_mb: int = 64
    max_output_bytes: int = 1_000_000
    max_output_depth: int = 64
    stderr_tail_bytes: int = 8192
    startup_s: float = 20.0
    max_model_calls: int = 64
    packages: tuple[str, ...] | None = None

    def rlimits(self) -> dict[str, int]:
        """The RLIMIT_* values the harness sets on itself before it loads the candidate."""
        cpu = int(self.cpu_s if self.cpu_s is not None else self.wall_s) + 1
        return {
            "RLIMIT_AS": self.memory_mb << 20,
            "RLIMIT_CPU": cpu,
            "RLIMIT_FSIZE": self.max_file_mb << 20,
            "RLIMIT_NPROC": self.max_processes,
            "RLIMIT_CORE": 0,
            "RLIMIT_NOFILE": 256,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one sandboxed run ended, as the parent saw it.

    `output` is the parsed JSON the harness sent (None when it sent nothing usable); `failure`
    names the limit or fault when the run did not end normally ("" when it did); `returncode` is
    the harness's exit status (negative: killed by that signal; None: killed by Skynet).
    `started` is False when the sandbox itself never became ready (Skynet's fault, or the
    machine's, never the candidate's: no candidate code had run).
    """

    output: Any = None
    has_output: bool = False
    failure: str = ""
    returncode: int | None = None
    stderr_tail: str = ""
    run_ns: int = 0
    total_ns: int = 0
    cpu_ns: int = 0  # CPU time of the sandbox's process tree from "go", measured by the parent
    oom: bool = False
    started: bool = True
