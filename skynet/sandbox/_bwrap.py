"""The bubblewrap command: the filesystem a candidate sees, the defences that hold it when Skynet
is root (its own uid, a read-only /proc, the keyring calls refused), and starting and killing
the sandbox.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from skynet.sandbox._limits import Limits


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
