"""Running one evaluation: whether candidates can be sandboxed here (probed once per process),
the private folders on the host, and `run_python`, which puts the sandbox's parts together.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from time import perf_counter_ns as _clock_ns
from typing import Any, cast

from skynet.errors import ConfigError, SandboxUnavailable

# _GUARDS and _interpreter are looked up in this module: a test that switches a defence off or
# breaks the interpreter patches them here (skynet.sandbox._run), as it does _probed.
from skynet.sandbox._bwrap import (
    _CANDIDATE_UID,
    _GUARDS,
    _drop_prefix,
    _environment,
    _interpreter,
    _kill,
    _seccomp_filter,
    _spawn,
)
from skynet.sandbox._cgroups import _Cgroup
from skynet.sandbox._limits import Limits, Outcome
from skynet.sandbox._proxy import ModelProxy, _serving
from skynet.sandbox._watch import _watch

MODES = ("bwrap", "none")
# The client a candidate imports as `skynet_sandbox`: skynet/_sandbox_client.py, copied into each
# sandbox and run there under `python -I -S` (standard library only); Skynet never imports it.
_CLIENT = Path(__file__).parent.parent / "_sandbox_client.py"
_INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora: `dnf install "
    "bubblewrap`; `bash scripts/install.sh` does it when run as root), or set [artifact] "
    'sandbox = "none" in skynet.toml to run candidates unsandboxed (they can then read your '
    "data and keys: only for code you trust)"
)

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
