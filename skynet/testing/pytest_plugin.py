"""pytest fixtures that Skynet ships for users' tests (registered through the pytest11 entry point)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skynet.testing.double import ModelDouble
from skynet.testing.server import ScriptedServer


@pytest.fixture
def scripted_server() -> Iterator[ScriptedServer]:
    """A started loopback OpenAI-compatible server; script it with .script(reply(...), ...)."""
    server = ScriptedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def model_double() -> Iterator[ModelDouble]:
    """An installed in-process model double (`skynet-double/skynet-test`); script it as the
    loopback server, with .script(reply(...), ...), and reach it through .models()."""
    with ModelDouble() as double:
        yield double
