"""Test set-up: no test reaches the network; each test starts with no model session configured."""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
for _var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "SKYNET_METRIC_MODEL", "OPENAI_API_BASE"):
    os.environ.pop(_var, None)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _loopback(address: object) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths and the like never leave the machine
    host = address[0]
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests may not reach the network (tried {address!r})")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _loopback(address):
        raise ConnectionRefusedError(f"tests may not reach the network (tried {address!r})")
    return _real_connect_ex(self, address)


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _no_model_session():
    """Each test starts with no process-wide model session, and leaves none behind."""
    from skynet.models import client

    client._global = None
    yield
    if client._global is not None:
        client._global.close()
    client._global = None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of the real embedded model is slow as well: `-m "not slow"` leaves it out."""
    for item in items:
        if item.get_closest_marker("embedded"):
            item.add_marker(pytest.mark.slow)
