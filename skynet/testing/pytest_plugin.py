"""pytest fixtures that Skynet ships for users' tests (registered through the pytest11 entry point)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skynet.testing.server import ScriptedServer


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started loopback OpenAI-compatible server; script it with .script(reply(...), ...)."""
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()
