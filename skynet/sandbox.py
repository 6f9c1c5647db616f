"""Isolation of untrusted code: every code-candidate evaluation runs inside bubblewrap.

A candidate is written by a model, so it is treated as an attacker. Each evaluation gets its own
bubblewrap (`bwrap`) sandbox:

- new user, PID, network, IPC, UTS, cgroup and mount namespaces; `--die-with-parent`,
  `--new-session`, every capability dropped. The candidate is never root on the host: as an
  ordinary user Skynet's uid is the candidate's; as root, Skynet maps uid 65534 into the
  sandbox's user namespace and the harness becomes it (with no group) before anything else runs;
- /proc read-only (sysctls, sysrq-trigger, every other knob), /proc/keys unreadable, and the
  kernel keyring syscalls (add_key, request_key, keyctl) refused by a seccomp filter;
- a filesystem of read-only binds of what the interpreter needs (/usr, the interpreter's own
  prefix and its site-packages: installed packages import, `Limits.packages` may narrow which),
  private size-limited tmpfs at /tmp (the working folder) and /dev/shm, everything else
  read-only,
  and /skynet: this evaluation's code.py, input.json, the model socket and the client module,
  read-only. No project file, data, metric, run store, cache, home, other candidate or network
  (not even loopback to the host);
- an environment holding only PATH, HOME, LANG and PYTHONHASHSEED;
- limits: wall time (the parent), CPU time, address space, file size, process count (RLIMIT_*,
  set by the harness before any candidate code runs), plus a cgroup for the process count and the
  memory of the whole sandbox when this machine lets Skynet create one (as root, or in a delegated
  cgroup v2 subtree);
- nothing outlives it: when the harness ends or time runs out, the PID namespace dies and every
  process in it with it (setsid, double fork and nohup included).

The parent never opens a path the candidate controls. The harness speaks on two pipes: the
output channel (one byte "ready", then the JSON of the output) and stderr; the parent reads both
incrementally, each with a deadline, keeps at most `max_output_bytes` of the one and the last
`stderr_tail_bytes` of the other, and bounds the output's JSON nesting. A FIFO, a symlink, a sparse
file or a flood cannot hang or balloon the parent.

One channel out: a model proxy on a Unix socket, served by the parent. The candidate imports
`skynet_sandbox` (a small stdlib client) and calls `complete(...)`; the parent makes the call
through skynet.models as the task role (metered into the item's Observation, cached, governed,
budgeted). No key enters the sandbox.

The time the meter sees is the parent's clock from the moment it lets the harness load the
candidate ("go") to the end of the output: sandbox start-up and teardown are not the candidate's
time, and nothing the candidate does before "go" (there is nothing) or after its output counts.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import json
import math
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns as _clock_ns
from typing import Any, cast

from skynet.errors import ConfigError, SandboxUnavailable

__all__ = [
    "describe",
    "Limits",
    "Outcome",
    "ModelProxy",
    "MODES",
    "check_available",
    "run_python",
    "bounded_json",
    "site_folders",
]

MODES = ("bwrap", "none")
_CLIENT = Path(__file__).with_name("_sandbox_client.py")
_INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
    "bubblewrap`; `bash scripts/install.sh` does it when run as root), or set [artifact] "
    'sandbox = "none" in skynet.toml to run candidates unsandboxed (they can then read your '
    "data and keys: only for code you trust)"
)


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


# -- availability ---------------------------------------------------------------------------
_probe_lock = threading.Lock()
_probed: dict[str, str] = {}  # mode -> "" (works) or the reason it does not


def check_available(mode: str = "bwrap") -> None:
    """Make sure candidates can be sandboxed here; probed once per process.

    Raises:
        ConfigError: an unknown mode.
        SandboxUnavailable: bwrap is missing or cannot create namespaces (the message names the
            fix).
    """
    if mode not in MODES:
        raise ConfigError(
            f"[artifact] sandbox = {mode!r} is not a sandbox; use one of: "
            + ", ".join(repr(m) for m in MODES)
        )
    if mode == "none":
        return
    with _probe_lock:
        if mode not in _probed:
            _probed[mode] = _probe()
        why = _probed[mode]
    if why:
        raise SandboxUnavailable(
            f"code candidates run inside bubblewrap, but {why}; {_INSTALL_HINT}"
        )


def _probe() -> str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "`bwrap` is not on PATH"
    command = [_interpreter(), "-I", "-S", "-c", _drop_prefix(_GUARDS) + "pass"]
    proc: subprocess.Popen[bytes] | None = None
    try:
        proc = _spawn(
            command,
            box=Path("/"),
            limits=Limits(),
            probe=True,
            guards=_GUARDS,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        _, err = proc.communicate(timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        if proc is not None:
            _kill(proc)
        return f"bwrap could not be started ({exc})"
    if proc.returncode != 0:
        text = err.decode("utf-8", "replace").strip().splitlines()
        return (
            "bwrap cannot create its namespaces here ("
            + (text[-1] if text else f"exit {proc.returncode}")
            + "; a container without user namespaces, or kernel.unprivileged_userns_clone = 0,"
            " or user.max_user_namespaces = 0: as root too, Skynet runs each candidate in a user"
            f" namespace of its own, as uid {_CANDIDATE_UID})"
        )
    return ""


def describe(mode: str = "bwrap") -> str:
    """One line on how candidates are isolated here, recorded with each run."""
    if mode == "none":
        return "none: unsandboxed child processes"
    version = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        version = subprocess.run(
            ["bwrap", "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    cgroup = _Cgroup.make(Limits())
    if cgroup is not None:
        cgroup.kill_and_remove()
        whole = f"whole-sandbox processes and memory held by a cgroup (v{cgroup.version})"
    else:
        whole = "no cgroup here: whole-sandbox processes and memory sampled every 20 ms"
    return f"{version or 'bubblewrap'}; {_guarded(_GUARDS)}; {whole}"


def _guarded(guards: frozenset[str]) -> str:
    """How the candidate is held here, in words, for describe()."""
    if os.geteuid() == 0 and "user" in guards:
        who = f"candidate as uid {_CANDIDATE_UID} in a user namespace of its own (Skynet is root)"
    elif os.geteuid() == 0:
        who = "candidate as root without capabilities (Skynet is root)"
    else:
        who = f"candidate as Skynet's uid {os.geteuid()} in a user namespace of its own"
    parts = [who, "no capabilities"]
    if "proc" in guards:
        parts.append("/proc read-only")
    if "keyring" in guards and _seccomp_filter():
        parts.append("kernel keyring calls refused")
    elif "keyring" in guards:
        parts.append(f"kernel keyring calls not filtered on {os.uname().machine}")
    return ", ".join(parts)


# -- the filesystem the sandbox sees -------------------------------------------------------
def _interpreter() -> str:
    """The real interpreter (a venv's python is a symlink to its base)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


@functools.cache
def _interpreter_roots() -> tuple[str, ...]:
    """The trees the interpreter needs besides /usr: its prefix and the folder of its binary."""
    roots = {os.path.realpath(sys.base_prefix), os.path.dirname(os.path.dirname(_interpreter()))}
    return tuple(sorted(root for root in roots if not _under(root, "/usr")))


@functools.cache
def _system_binds() -> tuple[str, ...]:
    """Read-only binds for the interpreter: /usr (merged-/usr layout) and its own trees. The
    same for every evaluation of this process: computed once."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/") / name
        if top.is_symlink():
            args += ["--symlink", os.readlink(top), str(top)]
        elif top.is_dir():
            args += ["--ro-bind", str(top), str(top)]
    if Path("/etc/ld.so.cache").exists():
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    for root in _interpreter_roots():
        args += ["--ro-bind", root, root]
    return tuple(args)


@functools.cache
def site_folders() -> tuple[str, ...]:
    """The folders of the interpreter's installed packages, which a code candidate imports from
    (bound read-only in the sandbox): site.getsitepackages() and the user site when it is on
    sys.path, real paths that exist. Never the project or the working folder; no .pth file is
    read, so an editable install (its path into a project) stays out."""
    import site

    found = list(site.getsitepackages())
    user = site.getusersitepackages()
    if user in sys.path:
        found.append(user)
    real = (os.path.realpath(folder) for folder in found)
    return tuple(dict.fromkeys(folder for folder in real if os.path.isdir(folder)))


def _own_sites() -> tuple[str, ...]:
    """The site folders that no bound system tree holds already (a venv's, the user site)."""
    roots = ("/usr", *_interpreter_roots())
    return tuple(f for f in site_folders() if not any(_under(f, root) for root in roots))


def _site_binds() -> list[str]:
    return [arg for folder in _own_sites() for arg in ("--ro-bind", folder, folder)]


@functools.cache
def _open_parents() -> tuple[str, ...]:
    """bwrap makes the folders above a bound tree (/root above a pyenv interpreter) 0700 root
    in the sandbox; a candidate that is not root must pass through them. They hold nothing else
    there."""
    parents: dict[str, None] = {}
    for root in (*_interpreter_roots(), *_own_sites()):
        parent = os.path.dirname(root)
        while parent != "/":
            parents[parent] = None
            parent = os.path.dirname(parent)
    return tuple(arg for parent in parents for arg in ("--chmod", "0755", parent))


def _masks(empty: Path, hidden: Sequence[Path]) -> list[str]:
    """Cover every hidden folder (the project, home, the working directory, a base
    interpreter's site-packages that is not this one's) that falls inside a bound tree with an
    empty read-only folder."""
    ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
    base_site = Path(os.path.realpath(sys.base_prefix)) / "lib" / ver / "site-packages"
    candidates = [*([base_site] if str(base_site) not in site_folders() else []), *hidden]
    args: list[str] = []
    roots = ("/usr", *_interpreter_roots(), *site_folders())
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.isdir(real) and any(_under(real, root) for root in roots):
            args += ["--ro-bind", str(empty), real]
    return args


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# The defences that hold a candidate when Skynet is root, each switchable only so that the tests
# can show the attack it stops succeeding without it:
#   "user"    - as root, the candidate runs as uid _CANDIDATE_UID (the host's too) in a user
#               namespace of its own, not as root with its capabilities dropped;
#   "proc"    - its /proc is read-only (sysctls, sysrq-trigger, irq, every other knob);
#   "keyring" - the kernel keyring syscalls are refused (seccomp) and /proc/keys is unreadable.
_GUARDS = frozenset({"user", "proc", "keyring"})
# nobody: owns no file on the host and no process Skynet's candidate could see.
_CANDIDATE_UID = 65534


def _bwrap_argv(
    box: Path,
    limits: Limits,
    *,
    probe: bool = False,
    hidden: Sequence[Path] = (),
    guards: frozenset[str] = _GUARDS,
    seccomp_fd: int = -1,
    userns_fds: tuple[int, int] | None = None,
) -> list[str]:
    """bwrap's arguments up to "--". `seccomp_fd` reads the keyring filter; `userns_fds`
    (info, block) let a root Skynet write the user namespace's maps before bwrap goes on."""
    argv = [
        "bwrap",
        "--unshare-all",  # user (when possible), ipc, pid, net, uts, cgroup namespaces
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    if userns_fds is not None:
        # As root bwrap maps the sandbox's user to root (uid 0 outside), which is still root to
        # sysctls and keys. Instead Skynet writes the maps (root for bwrap's set-up, and
        # _CANDIDATE_UID), and the harness keeps the two capabilities it needs to become it.
        info, block = userns_fds
        argv += ["--unshare-user", "--info-fd", str(info), "--userns-block-fd", str(block)]
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    if seccomp_fd >= 0:
        argv += ["--seccomp", str(seccomp_fd)]
    # The candidate (uid _CANDIDATE_UID as root) owns neither tmpfs: both are open to it.
    shared = ["--perms", "1777"] if "user" in guards else []
    argv += [
        *_system_binds(),
        *(_open_parents() if "user" in guards else ()),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *shared,
        "--size",
        str(limits.tmpfs_mb << 20),
        "--tmpfs",
        "/dev/shm",
        *shared,
        "--size",
        str(limits.tmpfs_mb << 20),
        "--tmpfs",
        "/tmp",
    ]
    if "keyring" in guards:
        # The keys its processes may view (the session keyring's among them), by name: a char
        # device on a nodev mount, so any read is refused.
        for name in ("keys", "key-users"):
            argv += ["--ro-bind", "/dev/null", f"/proc/{name}"]
    if not probe:
        argv += ["--ro-bind", str(box / "in"), "/skynet", *_site_binds()]
        argv += _masks(box / "empty", hidden)  # after the binds: a hidden folder stays hidden
    argv += ["--chdir", "/tmp", "--remount-ro", "/dev", "--remount-ro", "/"]
    if "proc" in guards:
        # bwrap covers /proc/sys only when the folder itself is writable, which it never is,
        # while its files are (to root). All of /proc, /proc/self's files included, is read-only.
        argv += ["--remount-ro", "/proc"]
    argv.append("--clearenv")
    for name, value in _environment("/tmp").items():
        argv += ["--setenv", name, value]
    return [*argv, "--"]


def _drop_prefix(guards: frozenset[str]) -> str:
    """Python run first in the sandbox when Skynet is root: become _CANDIDATE_UID, with no
    group, before the harness (and the candidate) do anything; the capabilities go with root."""
    if "user" not in guards or os.geteuid() != 0:
        return ""
    uid = _CANDIDATE_UID
    return (
        f"import os\nos.setgroups([])\nos.setresgid({uid}, {uid}, {uid})\n"
        f"os.setresuid({uid}, {uid}, {uid})\n"
    )


# Key syscalls per machine: (AUDIT_ARCH_*, add_key, request_key, keyctl). Machines missing here
# run without the filter, and describe() says so.
_KEY_SYSCALLS = {
    "x86_64": (0xC000003E, 248, 249, 250),
    "aarch64": (0xC00000B7, 217, 218, 219),
}


@functools.cache
def _seccomp_filter() -> bytes:
    """A classic BPF program for bwrap --seccomp: add_key, request_key and keyctl fail with
    EPERM; a syscall of another ABI (32-bit, x32) kills the process, as the numbers differ there.
    b"" on a machine whose numbers Skynet does not know."""
    known = _KEY_SYSCALLS.get(os.uname().machine)
    if known is None:
        return b""
    arch, *calls = known
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    allow, kill, refuse = 0x7FFF0000, 0x80000000, 0x00050000 | 1  # RET_ERRNO | EPERM
    program = [
        (load, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, arch),
        (ret, 0, 0, kill),
        (load, 0, 0, 0),  # seccomp_data.nr
        (jge, len(calls) + 2, 0, 0x40000000),  # x32 numbers: to the kill below
        *((jeq, len(calls) - i, 0, nr) for i, nr in enumerate(calls)),
        (ret, 0, 0, allow),
        (ret, 0, 0, refuse),
        (ret, 0, 0, kill),
    ]
    return b"".join(struct.pack("=HBBI", *op) for op in program)


def _spawn(
    command: Sequence[str],
    *,
    box: Path,
    limits: Limits,
    guards: frozenset[str],
    probe: bool = False,
    hidden: Sequence[Path] = (),
    **popen: Any,
) -> subprocess.Popen[bytes]:
    """Start bwrap running `command`, its seccomp filter on a pipe; as root, write the user
    namespace's maps while bwrap waits for them. A sandbox whose maps could not be written is
    killed before bwrap may go on: it never runs as root."""
    ours: list[int] = []  # our ends, closed here
    theirs: list[int] = []  # bwrap's ends, closed once it has them
    try:
        seccomp_fd = -1
        program = _seccomp_filter() if "keyring" in guards else b""
        if program:
            seccomp_fd, write = os.pipe()
            theirs.append(seccomp_fd)
            os.write(write, program)  # far below a pipe's buffer
            os.close(write)
        userns_fds = None
        if "user" in guards and os.geteuid() == 0:
            info_read, info_write = os.pipe()
            block_read, block_write = os.pipe()
            ours += [info_read, block_write]
            theirs += [info_write, block_read]
            userns_fds = (info_write, block_read)
        argv = _bwrap_argv(
            box,
            limits,
            probe=probe,
            hidden=hidden,
            guards=guards,
            seccomp_fd=seccomp_fd,
            userns_fds=userns_fds,
        )
        popen["pass_fds"] = (*popen.get("pass_fds", ()), *theirs)
        proc = cast("subprocess.Popen[bytes]", subprocess.Popen([*argv, *command], **popen))
        for fd in theirs:
            os.close(fd)
        theirs.clear()
        if userns_fds is not None:
            info_read, block_write = ours
            if _map_user(info_read, limits.startup_s):
                os.write(block_write, b"1")
            else:  # bwrap failed before, or the maps could not be written
                _kill(proc)
        return proc
    finally:
        for fd in (*ours, *theirs):
            with contextlib.suppress(OSError):
                os.close(fd)


def _map_user(info: int, timeout_s: float) -> bool:
    """Read the sandbox's pid from bwrap's info pipe and map its users: root to root, for
    bwrap's own set-up, and _CANDIDATE_UID to itself, which the harness becomes at once."""
    data = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(info, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(info, 4096)
            if not chunk:
                break
            data += chunk
    try:
        pid = int(json.loads(data)["child-pid"])
        uid = _CANDIDATE_UID
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as maps:
                maps.write(f"0 0 1\n{uid} {uid} 1\n")
    except (ValueError, KeyError, TypeError, OSError):
        return False
    return True


def _environment(home: str) -> dict[str, str]:
    """All a candidate's environment holds, sandboxed or not: no key, nothing of Skynet's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
    }


# -- the private folders on the host ---------------------------------------------------------
_root_lock = threading.Lock()
_root: Path | None = None


def _private_root() -> Path:
    """One 0700 folder per Skynet process under the system temp dir; removed at exit, and by
    the next Skynet when this one was killed before it could remove it."""
    global _root
    with _root_lock:
        if _root is None or not _root.is_dir():
            _sweep()
            _root = Path(tempfile.mkdtemp(prefix=f"skynet-sandbox-{os.getpid()}-"))
            os.chmod(_root, 0o700)
            atexit.register(shutil.rmtree, _root, True)
        return _root


def _sweep() -> None:
    """Remove the private folders of Skynet processes of this user that are gone."""
    for old in Path(tempfile.gettempdir()).glob("skynet-sandbox-*-*"):
        try:
            pid = int(old.name.split("-")[2])
            if old.stat().st_uid != os.geteuid() or Path(f"/proc/{pid}").exists():
                continue
        except (ValueError, IndexError, OSError):
            continue
        shutil.rmtree(old, ignore_errors=True)


# -- the model proxy ------------------------------------------------------------------------
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


# -- cgroups: the whole sandbox's processes and memory --------------------------------------
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


# -- running one evaluation -----------------------------------------------------------------
def run_python(
    harness: str,
    files: Mapping[str, bytes],
    *,
    limits: Limits,
    mode: str = "bwrap",
    proxy: ModelProxy | None = None,
    hidden: Sequence[Path] = (),
) -> Outcome:
    """Run the `harness` script in a fresh sandbox with `files` in /skynet; read it bounded.

    The harness is called as `python -I -S -c HARNESS OUT_FD RLIMITS_JSON BOX` (BOX: where
    `files` are, /skynet in the sandbox; BOX/lib holds the skynet_sandbox client). It must set
    the RLIMITS, write b"R" to OUT_FD, wait for one byte on stdin, then run the candidate and
    write its JSON output to OUT_FD. `hidden` lists host folders (the project,
    home) that must stay invisible even if they lie inside a bound system tree.

    Raises:
        SandboxUnavailable: mode "bwrap" and bubblewrap cannot run here.
    """
    check_available(mode)
    began = _clock_ns()
    box = Path(tempfile.mkdtemp(prefix="ev-", dir=_private_root()))
    cgroup: _Cgroup | None = None
    proc: subprocess.Popen[bytes] | None = None
    read_out = write_out = -1
    try:
        inside = box / "in"
        (inside / "lib").mkdir(parents=True)
        (box / "empty").mkdir()
        for name, data in files.items():
            (inside / name).write_bytes(data)
        shutil.copyfile(_CLIENT, inside / "lib" / "skynet_sandbox.py")
        # Readable by the candidate's uid whatever Skynet's umask; the host reaches none of it
        # (the private root is 0700).
        for path in (inside, inside / "lib", *inside.iterdir(), *(inside / "lib").iterdir()):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        read_out, write_out = os.pipe()
        rlimits = json.dumps(limits.rlimits())
        guards = _GUARDS
        if mode == "bwrap":
            cwd: Path | None = None
            where = "/skynet"
            harness = _drop_prefix(guards) + harness
        else:
            cwd = inside
            where = str(inside)
        argv = [_interpreter(), "-I", "-S", "-c", harness, str(write_out), rlimits, where]
        # bwrap clears the environment and sets the candidate's inside the sandbox.
        env = _environment("/tmp" if mode == "bwrap" else str(inside))
        with _serving(proxy, inside / "model.sock"):
            popen: dict[str, Any] = {
                "cwd": cwd,
                "env": env,
                "stdin": subprocess.PIPE,
                "stdout": subprocess.DEVNULL,
                "stderr": subprocess.PIPE,
                "pass_fds": (write_out,),
                "start_new_session": True,  # its own process group: Skynet kills it whole
            }
            if mode == "bwrap":
                proc = _spawn(argv, box=box, limits=limits, guards=guards, hidden=hidden, **popen)
            else:
                proc = cast("subprocess.Popen[bytes]", subprocess.Popen(argv, **popen))
            os.close(write_out)
            write_out = -1
            cgroup = _Cgroup.make(limits) if mode == "bwrap" else None
            outcome = _watch(proc, read_out, limits, cgroup, 2 if mode == "bwrap" else 0)
        return dataclasses.replace(outcome, total_ns=_clock_ns() - began)
    finally:
        if proc is not None:
            _kill(proc)
            for stream in (proc.stdin, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if cgroup is not None:
            cgroup.kill_and_remove()
        for fd in (read_out, write_out):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        shutil.rmtree(box, ignore_errors=True)


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


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the sandbox's process group (bwrap and its init: the PID namespace dies with its
    init) and reap it."""
    for _ in range(100):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            break
        if proc.poll() is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
