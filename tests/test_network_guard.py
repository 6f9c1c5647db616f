import socket

import pytest


def test_a_non_loopback_connection_is_refused():
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s,
        pytest.raises(ConnectionRefusedError, match="network"),
    ):
        s.connect(("192.0.2.1", 80))


def test_loopback_is_allowed(scripted_server):
    host, port = scripted_server.url.split("//")[1].split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=2):
        pass
