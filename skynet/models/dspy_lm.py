"""DSPy's model calls through skynet.models: a dspy.BaseLM whose every call takes Skynet's path
(cache, governor, retries, ledgers, and the meter of the item being evaluated). DSPy's own cache
is off, so nothing bypasses Skynet's.

Written against dspy 3.4's BaseLM.forward interface (deprecated there, still supported through
3.4; dspy is pinned to 3.4.1). Moving to dspy's engine interface is due before dspy 3.5.
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from collections.abc import Iterator
from typing import Any

import dspy
from dspy.utils.callback import BaseCallback

from skynet.evaluation import current_draw as _current_draw
from skynet.measure import active_meter
from skynet.models.client import Models
from skynet.models.ledger import CallRecord

__all__ = ["SkynetLM", "adopt", "lm_settings", "take_over", "watch"]

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
        model: str | None = None,
    ) -> None:
        super().__init__(
            model=model or models.config.model_for(role),
            model_type="chat",
            temperature=temperature,
            max_tokens=max_tokens,
            cache=False,
            num_retries=0,
        )
        self.models = models
        self.role = role
        self._model = model  # a program's own LM taken over (take_over()); None: the role's

    def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
        from skynet.models._litellm import litellm

        chat = messages or [{"role": "user", "content": prompt}]
        params = {**self.kwargs, **kwargs}
        reply = self.models.complete(
            self.role,
            chat,
            model=self._model,
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


def take_over(program: Any, models: Models, role: str = "task") -> None:
    """Route the LMs a program holds itself (a predictor's `set_lm(...)`, an LM kept as a
    module's attribute) through Skynet's models, in place: each dspy.LM becomes a SkynetLM for
    the same model, reached as the LM says (its api_base and key, unless skynet.toml declares
    the model) with its own temperature and max_tokens, under `role`. Run on a copy of the
    program (DspyArtifact.with_candidate makes one per call). An LM that is not a dspy.LM (a
    custom BaseLM) cannot be taken over: watch() sees its calls as unmeasured.

    Raises:
        ConfigError: under a money budget, such an LM's model has no known price.
    """
    taken: dict[int, SkynetLM] = {}

    def routed(lm: dspy.LM) -> SkynetLM:
        found = taken.get(id(lm))
        if found is None:
            found = taken[id(lm)] = _routed(lm, models, role)
        return found

    for _, module in program.named_sub_modules():  # the program itself first
        for name, value in list(vars(module).items()):
            if isinstance(value, dspy.LM) and not isinstance(value, SkynetLM):
                setattr(module, name, routed(value))


def adopt(lm: dspy.LM, models: Models) -> None:
    """Reach `lm`'s model through `models` as `lm` says: its api_base and key, held in memory
    (never recorded), unless skynet.toml declares them for the model (Models.adopt).

    Raises:
        ConfigError: under a money budget, the model has no known price.
    """
    kwargs = lm.kwargs
    models.adopt(
        lm.model,
        api_base=kwargs.get("api_base") or kwargs.get("base_url"),
        api_key=kwargs.get("api_key"),
    )


def lm_settings(lm: Any) -> dict[str, Any]:
    """The temperature and max_tokens `lm` sets, by [artifact]'s names: a dspy.LM keeps them in
    `kwargs`, max_tokens as max_completion_tokens for a reasoning model; one it leaves unset
    (None) is left out."""
    kwargs = getattr(lm, "kwargs", None) or {}
    found = {
        "temperature": kwargs.get("temperature"),
        "max_tokens": kwargs.get("max_tokens") or kwargs.get("max_completion_tokens"),
    }
    return {name: value for name, value in found.items() if value is not None}


def _routed(lm: dspy.LM, models: Models, role: str) -> SkynetLM:
    """A SkynetLM for `lm`'s model under `role`, reached as `lm` says, with its settings."""
    adopt(lm, models)
    settings = lm_settings(lm)
    return SkynetLM(
        models,
        role,
        model=lm.model,
        max_tokens=settings.get("max_tokens"),
        temperature=settings.get("temperature") or 0.0,
    )


class _Unmeasured(BaseCallback):
    """Sees the calls of LMs that are not Skynet's (a metric's own judge LM, a custom BaseLM)
    and records each as an unmeasured call of `role`: its time as seen from here, its tokens
    and cost unknown (never $0)."""

    def __init__(self, models: Models, role: str) -> None:
        self.models = models
        self.role = role
        self._started: dict[str, tuple[str, Any, int]] = {}

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        if isinstance(instance, SkynetLM):
            return  # measured on Skynet's path
        model = str(getattr(instance, "model", None) or type(instance).__name__)
        self._started[call_id] = (model, inputs, time.monotonic_ns())

    def on_lm_end(
        self, call_id: str, outputs: Any | None, exception: Exception | None = None
    ) -> None:
        started = self._started.pop(call_id, None)
        if started is None:
            return
        model, inputs, began = started
        self.models.absorb(
            CallRecord(
                role=self.role,
                model=model,
                elapsed_ms=(time.monotonic_ns() - began) / 1e6,
                ok=exception is None,
                error="" if exception is None else f"{type(exception).__name__}: {exception}",
                item_id=getattr(active_meter(), "item_id", None),
                prompt=_as_json(inputs.get("messages") or inputs.get("prompt")),
                reply=_as_json(outputs) if exception is None else "",
                measured=False,
            )
        )


@contextlib.contextmanager
def watch(models: Models, role: str) -> Iterator[None]:
    """While the block runs, the LM in force (dspy.configure(lm=...): a metric's DSPy judge
    uses it) takes Skynet's path under `role`, and calls of other LMs than Skynet's are
    recorded as unmeasured calls of `role` (through DSPy's own callbacks, beside any the user
    set)."""
    callbacks = list(dspy.settings.get("callbacks") or [])
    settings: dict[str, Any] = {"callbacks": [*callbacks, _Unmeasured(models, role)]}
    lm = dspy.settings.get("lm")
    if isinstance(lm, dspy.LM) and not isinstance(lm, SkynetLM):
        settings["lm"] = _routed(lm, models, role)
    with dspy.context(**settings):
        yield


def _as_json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return json.dumps(str(value))
