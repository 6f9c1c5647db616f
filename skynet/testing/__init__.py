"""Tools for testing metrics, prompts and Skynet itself, offline.

- observing(): give observation(), service_cost() and reward() figures in a unit test.
- ScriptedServer: a real loopback HTTP server speaking the OpenAI API from a script
  (pytest fixture: `scripted_server`, registered by the skynet pytest plugin).
- ModelDouble: the same script answered in-process (no HTTP, no server thread), under the litellm
  model `skynet-double/skynet-test`, through the whole of Skynet's model path.
- is_reflection(text): whether a request is a reflection call (for a scripted responder).
- engine_context(...): a real EngineContext over a score and a reflect function, with no run
  behind it, to test an engine (a plugin's) in a unit test; what it recorded is `ctx.recorded`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from skynet.errors import SkynetError
from skynet.measure import TESTING, Observation, in_evaluation, scoring
from skynet.testing.double import DOUBLE_MODEL, ModelDouble
from skynet.testing.engine import Recorded, engine_context
from skynet.testing.server import MODEL, ScriptedServer, Step, fail, hang, reply

__all__ = [
    "observing",
    "is_reflection",
    "ScriptedServer",
    "ModelDouble",
    "Step",
    "reply",
    "fail",
    "hang",
    "MODEL",
    "DOUBLE_MODEL",
    "engine_context",
    "Recorded",
]

# The opening words of each reflection template a run may send: gepa's default, gepa's builder
# (objective or background set), Skynet's short prompt and code templates.
REFLECTION_OPENINGS = (
    "I am optimizing a parameter in my system.",
    "You are an expert optimization assistant.",
    "You improve an instruction given to an AI assistant.",
    "You improve a Python program.",
)


def is_reflection(text: object) -> bool:
    """Whether a request's text (or its last message's content) is a reflection prompt."""
    if isinstance(text, dict):  # a request body
        messages = text.get("messages") or [{}]
        text = messages[-1].get("content", "")
    return isinstance(text, str) and text.lstrip().startswith(REFLECTION_OPENINGS)


@contextlib.contextmanager
def observing(
    *,
    elapsed_ms: float = 0.0,
    cost_usd: float | None = 0.0,
    model_calls: int = 0,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_note: str = "",
    time_note: str = "",
    cache_hit: bool = False,
) -> Iterator[Observation]:
    """Inside this block, observation(), service_cost() and reward() see the given figures.

    For users' own unit tests of metric.py. It refuses inside a metered evaluation, so that during
    a run nothing but the meter sets the figures.

    Raises:
        SkynetError: when called inside a metered evaluation.
    """
    if in_evaluation():
        raise SkynetError(
            "skynet.testing.observing() was called inside a metered evaluation: during a run "
            "only Skynet's meter sets time and cost; use observing() in unit tests only"
        )
    obs = Observation(
        elapsed_ms=elapsed_ms,
        model_calls=model_calls,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd,
        cost_note=cost_note or ("" if cost_usd is not None else "cost not measurable (given)"),
        time_note=time_note,
        cache_hit=cache_hit,
    )
    with scoring(obs, source=TESTING):
        yield obs
