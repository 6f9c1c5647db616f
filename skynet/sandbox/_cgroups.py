"""The whole sandbox's processes, memory and CPU time: held by a cgroup (v2 or v1) where this
machine lets Skynet make one, else sampled from /proc by the parent every 20 ms.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from skynet.sandbox._limits import Limits


class _Cgroup:
    """A cgroup for one sandbox, v2 or v1, where this process may make one; else None."""

    def __init__(self, dirs: list[Path], version: int) -> None:
        self.dirs = dirs
        self.version = version

    @classmethod
    def make(cls, limits: Limits) -> _Cgroup | None:
        name = f"skynet-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            mine = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        paths: dict[str, str] = {}
        for line in mine:
            parts = line.split(":", 2)
            if len(parts) == 3:
                for ctrl in parts[1].split(","):
                    paths[ctrl] = parts[2]
        v1 = {c: Path("/sys/fs/cgroup") / c for c in ("pids", "memory")}
        if all((v1[c] / "cgroup.procs").exists() for c in v1) and "pids" in paths:
            made: list[Path] = []
            try:
                for ctrl in ("pids", "memory"):
                    path = v1[ctrl] / paths[ctrl].lstrip("/") / name
                    _sweep_cgroups(path.parent)
                    path.mkdir()
                    made.append(path)
                (made[0] / "pids.max").write_text(str(limits.max_processes))
                memory = str(limits.memory_mb << 20)
                (made[1] / "memory.limit_in_bytes").write_text(memory)
                swap = made[1] / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    with contextlib.suppress(OSError):
                        swap.write_text(memory)
                # The tree's CPU time, where cpuacct is there to count it (else sampled).
                acct = Path("/sys/fs/cgroup/cpuacct")
                if "cpuacct" in paths and (acct / "cgroup.procs").exists():
                    with contextlib.suppress(OSError):
                        path = acct / paths["cpuacct"].lstrip("/") / name
                        _sweep_cgroups(path.parent)
                        path.mkdir()
                        made.append(path)
                return cls(made, 1)
            except OSError:
                for path in made:
                    with contextlib.suppress(OSError):
                        path.rmdir()
                return None
        unified = paths.get("")
        if unified is not None:
            for mount in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
                parent = mount / unified.lstrip("/")
                if not (parent / "cgroup.subtree_control").exists():
                    continue
                path = parent / name
                _sweep_cgroups(parent)
                try:
                    path.mkdir()
                except OSError:
                    continue
                try:
                    controllers = (path / "cgroup.controllers").read_text().split()
                    if "pids" not in controllers or "memory" not in controllers:
                        raise OSError("pids/memory controllers not delegated")
                    (path / "pids.max").write_text(str(limits.max_processes))
                    (path / "memory.max").write_text(str(limits.memory_mb << 20))
                    with contextlib.suppress(OSError):
                        (path / "memory.swap.max").write_text("0")
                    return cls([path], 2)
                except OSError:
                    with contextlib.suppress(OSError):
                        path.rmdir()
        return None

    def cpu_ns(self) -> int | None:
        """CPU time used by the cgroup's processes, dead ones included; None where this
        cgroup does not count it (v1 without cpuacct)."""
        try:
            if self.version == 2:
                stat = (self.dirs[0] / "cpu.stat").read_text().split()
                return int(stat[stat.index("usage_usec") + 1]) * 1000
            if len(self.dirs) > 2:
                return int((self.dirs[2] / "cpuacct.usage").read_text())
        except (OSError, ValueError, IndexError):
            pass
        return None

    def attach(self, pids: Sequence[int]) -> bool:
        try:
            for path in self.dirs:
                for pid in pids:
                    (path / "cgroup.procs").write_text(str(pid))
        except OSError:
            return False
        return True

    def oom(self) -> bool:
        try:
            if self.version == 2:
                events = (self.dirs[0] / "memory.events").read_text().split()
                return int(events[events.index("oom_kill") + 1]) > 0
            return int((self.dirs[1] / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError, IndexError):
            return False

    def kill_and_remove(self) -> None:
        for _ in range(200):
            alive = False
            for path in self.dirs:
                if self.version == 2 and (path / "cgroup.kill").exists():
                    with contextlib.suppress(OSError):
                        (path / "cgroup.kill").write_text("1")
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    alive = True
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
            if not alive:
                break
            time.sleep(0.005)
        for path in self.dirs:
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def _sweep_cgroups(parent: Path) -> None:
    """Remove the cgroups a killed Skynet left behind (their processes died with the sandbox;
    an empty cgroup is removed with rmdir). Only those whose Skynet process is gone."""
    with contextlib.suppress(OSError):
        for old in parent.glob("skynet-*-*"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if not Path(f"/proc/{int(old.name.split('-')[1])}").exists():
                    old.rmdir()


def _tree(pid: int) -> list[int]:
    """pid and its descendants, from /proc/PID/task/*/children."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:  # the process may exit while it is read
            tasks = list(Path(f"/proc/{current}/task").glob("*"))
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError, ValueError):
                todo += [int(c) for c in (task / "children").read_text().split()]
    return found


_PAGE = os.sysconf("SC_PAGE_SIZE")


_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _cpu_sample(pids: Sequence[int], seen: dict[tuple[int, str], int]) -> None:
    """Add each process's user+system time (/proc/PID/stat) to `seen`, keyed by pid and start
    time (a reused pid is another process); a process's last sample stands after it exits."""
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            key = (pid, fields[19])  # field 22, starttime (fields[0] is field 3, state)
            used = (int(fields[11]) + int(fields[12])) * _TICK_NS  # fields 14, 15
        except (OSError, IndexError, ValueError):
            continue
        if used > seen.get(key, 0):
            seen[key] = used


def _over(pid: int, limits: Limits, ours: int, pids: Sequence[int] | None = None) -> str:
    """Why the sandbox rooted at `pid` is over its whole-sandbox limits ("" when it is not);
    `ours` of its processes are Skynet's (bwrap and the namespace's init)."""
    pids = _tree(pid) if pids is None else pids
    if len(pids) - ours > limits.max_processes:
        return f"the candidate started more than {limits.max_processes} processes and was killed"
    resident = 0
    for each in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            resident += int(Path(f"/proc/{each}/statm").read_text().split()[1]) * _PAGE
    if resident > limits.memory_mb << 20:
        return (
            f"the candidate's processes used more than {limits.memory_mb} MB together "
            "([artifact] memory_mb) and were killed"
        )
    return ""
