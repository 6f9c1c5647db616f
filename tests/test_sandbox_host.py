"""The host, as root (the way CI and containers run Skynet): a candidate may not touch the host's
kernel knobs or root's kernel keyring, and holds no privilege on the host (issue 25).

Each attack runs through the code artifact, as a real evaluation does. Its control runs the same
candidate with the defences switched off (`sandbox._run._GUARDS` empty: bwrap's arguments as they were
before), and it succeeds there. The controls never change the host: a knob is written only with
the value it already has, and core_pattern, drop_caches and sysrq-trigger are only opened for
writing (tests/fixtures/hostile/proc_knobs.py).
"""

from __future__ import annotations

import ctypes
import os
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import unprivileged

from skynet import sandbox
from skynet.artifacts.code import CodeArtifact
from skynet.sandbox import _run
from skynet.sandbox._bwrap import _CANDIDATE_UID

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"
REPO = Path(__file__).parent.parent
OFF: frozenset[str] = frozenset()  # the argv before issue 25

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the host attacks are root's: as an ordinary user, /proc/sys and root's keyring were "
    "never Skynet's to give away (tests/test_sandbox.py covers that user)",
)


@pytest.fixture(autouse=True)
def _bwrap():
    sandbox.check_available("bwrap")


def run(name: str, input: dict[str, Any] | None = None) -> Any:
    source = (HOSTILE / f"{name}.py").read_text()
    return CodeArtifact(source=source, sandbox="bwrap").run({"code": source}, input or {})


# -- who the candidate is --------------------------------------------------------------------
def test_the_candidate_is_not_root_and_holds_no_capability():
    got = run("identity")
    assert got["uid"] == got["euid"] == _CANDIDATE_UID, got
    assert got["host_uid"] == _CANDIDATE_UID, got  # not root on the host either
    assert got["groups"] == [], got
    assert int(got["CapEff"], 16) == 0 and int(got["CapPrm"], 16) == 0, got
    assert got["userns"] != os.readlink("/proc/self/ns/user"), got


def test_without_the_defence_the_candidate_is_root_on_the_host(monkeypatch):
    monkeypatch.setattr(_run, "_GUARDS", OFF)
    got = run("identity")
    # bwrap's own user namespace as root maps the sandbox's root to the host's: the kernel
    # checks sysctls and keys against that uid, whatever the capabilities.
    assert got["uid"] == 0 and got["host_uid"] == 0, got


# -- /proc's knobs ---------------------------------------------------------------------------
REFUSED = ("refused: Permission denied", "refused: Read-only file system", "absent")


def test_every_knob_is_refused():
    got = run("proc_knobs")
    for path, outcome in got["knobs"].items():
        assert outcome in REFUSED, (path, outcome)
    assert got["writable"] == [], got["writable"][:20]
    assert got["sys"] is False  # no /sys at all


@pytest.mark.parametrize("guards", [{"user"}, {"proc"}], ids=["uid-alone", "read-only-proc-alone"])
def test_each_layer_alone_refuses_the_knobs(monkeypatch, guards):
    """Defence in depth: the unprivileged uid (permission denied) and the read-only /proc
    (read-only file system) each hold the named knobs without the other. (The uid alone leaves
    the files anyone may write, /proc/pressure's triggers, open: the read-only /proc closes
    those too.)"""
    monkeypatch.setattr(_run, "_GUARDS", frozenset(guards))
    got = run("proc_knobs")
    for path, outcome in got["knobs"].items():
        assert outcome in REFUSED, (path, outcome)


def test_without_the_defence_the_knobs_are_writable(monkeypatch):
    monkeypatch.setattr(_run, "_GUARDS", OFF)
    got = run("proc_knobs")
    knobs = got["knobs"]
    # Written with the value it had: the host is unchanged, and the write went through.
    assert knobs["/proc/sys/vm/swappiness"] == "written", knobs
    assert knobs["/proc/sys/kernel/pid_max"] == "written", knobs
    assert knobs["/proc/sys/fs/file-max"] == "written", knobs
    assert knobs["/proc/sys/kernel/core_pattern"] == "opened for writing", knobs
    assert knobs["/proc/sys/vm/drop_caches"] == "opened for writing", knobs
    if os.path.exists("/proc/sysrq-trigger"):
        assert knobs["/proc/sysrq-trigger"] == "opened for writing", knobs
    assert "/proc/sys/kernel/core_pattern" in got["writable"]


# -- root's kernel keyring -------------------------------------------------------------------
_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
_SESSION, _USER = -3, -4  # KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING
_JOIN_SESSION, _UNLINK = 1, 9


def _in_root_session(attack: Callable[[dict[str, Any]], Any]) -> tuple[Any, str]:
    """Run `attack` from a thread whose session keyring is a fresh one (as a root login's or a
    container's is) holding a key with a secret, with another secret key in root's user keyring.
    The sandbox starts from that thread, so it inherits that session keyring. Returns what
    `attack` returned and the secret; both keys are removed after."""
    calls = _KEYCTL.get(os.uname().machine)
    if calls is None:
        pytest.skip(f"the keyring syscall numbers of {os.uname().machine} are not known here")
    add_key, keyctl = calls
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    secret = "ROOT-KEY-" + uuid.uuid4().hex
    done: dict[str, Any] = {}

    def thread() -> None:
        serials: list[int] = []
        try:
            # A new anonymous session keyring for this thread only (credentials are per thread).
            assert libc.syscall(keyctl, _JOIN_SESSION, None) > 0, ctypes.get_errno()
            for ring in (_SESSION, _USER):
                desc = f"{secret}-{ring}".encode()
                serial = libc.syscall(
                    add_key, b"user", desc, secret.encode(), len(secret), ctypes.c_long(ring)
                )
                assert serial > 0, os.strerror(ctypes.get_errno())
                serials.append(serial)
            done["value"] = attack({"serials": serials, "description": f"{secret}-{_SESSION}"})
        except BaseException as exc:  # re-raised in the test's thread
            done["error"] = exc
        finally:  # unlinked, a key is gone: root's user keyring outlives the test
            for serial, ring in zip(serials, (_SESSION, _USER), strict=False):
                libc.syscall(keyctl, _UNLINK, ctypes.c_long(serial), ctypes.c_long(ring))

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join()
    if "error" in done:
        raise done["error"]
    return done["value"], secret


def test_roots_keyring_is_unreachable():
    got, secret = _in_root_session(lambda keys: run("keyring", keys))
    assert secret not in repr(got), got
    for attempt, outcome in got.items():
        if attempt == "/proc/keys":
            assert outcome == "refused: Permission denied", outcome
        else:
            assert outcome == "refused: Operation not permitted", (attempt, outcome)


def test_without_the_defence_roots_keys_are_read(monkeypatch):
    monkeypatch.setattr(_run, "_GUARDS", OFF)
    got, secret = _in_root_session(lambda keys: run("keyring", keys))
    assert got["search"] == secret, got  # the session key's payload
    assert secret in got["/proc/keys"], got  # and root's user key, by name


def test_an_unprivileged_uid_alone_still_reads_the_session_keyring(monkeypatch):
    """The uid is not the keyring's defence: the session keyring is inherited, and a key in it is
    possessed whoever the process is. The seccomp filter is."""
    monkeypatch.setattr(_run, "_GUARDS", frozenset({"user", "proc"}))
    got, secret = _in_root_session(lambda keys: run("keyring", keys))
    assert got["search"] == secret, got


# -- the same attacks against an unprivileged Skynet -----------------------------------------
@pytest.fixture(scope="module")
def as_nobody():
    why = unprivileged.available()
    if why:
        pytest.skip(f"unprivileged case: {why}")
    helper = unprivileged.Unprivileged(REPO)
    yield helper
    helper.close()


def test_an_unprivileged_skynet_holds_the_knobs_and_the_keyring(as_nobody):
    def source(name: str) -> str:
        return (HOSTILE / f"{name}.py").read_text()

    knobs = as_nobody.run(source("proc_knobs"), {})["output"]
    for path, outcome in knobs["knobs"].items():
        assert outcome in REFUSED, (path, outcome)
    assert knobs["writable"] == [], knobs["writable"][:20]
    got, secret = _in_root_session(lambda keys: as_nobody.run(source("keyring"), keys)["output"])
    assert secret not in repr(got), got
