"""llm(): the metric's judge call to the metric model (else the reflection model)."""

from __future__ import annotations

import json
from typing import Any

from skynet.models.client import current

__all__ = ["llm"]


def llm(
    instructions: str,
    input: Any = None,
    *,
    model: str | None = None,
    draw: int = 0,
    temperature: float = 0.0,
    max_tokens: int = 512,
    **params: Any,
) -> str:
    """Ask the metric model to judge something; returns its reply text.

    Answers are cached by (model, instructions, input, parameters, draw index): the same output
    judged twice costs one call and gives one verdict. Calls go through the governor and the
    retry policy and are recorded in the metric (judge) ledger, never in the task cost.

    Args:
        instructions: what the judge must do (sent as the system message).
        input: what to judge: a str is sent as is, anything else as JSON.
        model: overrides the configured metric model.
        draw: the draw index; another index asks afresh instead of reusing the cached verdict.
        temperature, max_tokens, **params: sampling parameters.

    Raises:
        ConfigError: no model is configured (set SKYNET_METRIC_MODEL in a plain script).
        ModelError: the call failed after retries.
    """
    messages: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    if input is not None:
        text = (
            input if isinstance(input, str) else json.dumps(input, ensure_ascii=False, default=str)
        )
        messages.append({"role": "user", "content": text})
    reply = current(for_metric=True).complete(
        "metric",
        messages,
        model=model,
        draw=draw,
        temperature=temperature,
        max_tokens=max_tokens,
        **params,
    )
    return reply.text
