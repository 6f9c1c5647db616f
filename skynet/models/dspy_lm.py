"""DSPy's model calls through skynet.models: a dspy.BaseLM whose every call takes Skynet's path
(cache, governor, retries, ledgers, and the meter of the item being evaluated). DSPy's own cache
is off, so nothing bypasses Skynet's.

Written against dspy 3.4's BaseLM.forward interface (deprecated there, still supported through
3.4; dspy is pinned to 3.4.1). Moving to dspy's engine interface is due before dspy 3.5.
"""

from __future__ import annotations

import warnings
from typing import Any

import dspy

from skynet.evaluation import current_draw as _current_draw
from skynet.models.client import Models

__all__ = ["SkynetLM"]

warnings.filterwarnings(
    "ignore", message="Implementing custom LMs through BaseLM.forward", category=DeprecationWarning
)


class SkynetLM(dspy.BaseLM):
    """A DSPy LM for one role of a Skynet model session.

    Args:
        models: the session whose model serves `role`.
        role: "task" (metered, in service_cost()) or "reflection".
        max_tokens, temperature: defaults for each call.
    """

    def __init__(
        self,
        models: Models,
        role: str = "task",
        *,
        max_tokens: int | None = 512,
        temperature: float = 0.0,
    ) -> None:
        super().__init__(
            model=models.config.model_for(role),
            model_type="chat",
            temperature=temperature,
            max_tokens=max_tokens,
            cache=False,
            num_retries=0,
        )
        self.models = models
        self.role = role

    def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
        from skynet.models._litellm import litellm

        chat = messages or [{"role": "user", "content": prompt}]
        params = {**self.kwargs, **kwargs}
        reply = self.models.complete(
            self.role,
            chat,
            max_tokens=params.get("max_tokens"),
            temperature=params.get("temperature"),
            # DSPy's rollout_id when it sets one, else the repetition in progress (repeat = N).
            draw=int(params.get("rollout_id") or _current_draw()),
        )
        return litellm.ModelResponse(
            model=reply.model,
            choices=[
                {
                    "index": 0,
                    "finish_reason": reply.finish_reason,
                    "message": {"role": "assistant", "content": reply.text},
                }
            ],
            usage=litellm.Usage(
                prompt_tokens=reply.input_tokens,
                completion_tokens=reply.output_tokens,
                total_tokens=reply.input_tokens + reply.output_tokens,
            ),
        )
