"""An in-process model double: the loopback server's script, answered without HTTP.

`ModelDouble` answers a script of reply(), fail() and hang() steps as ScriptedServer does, from
the same code (skynet.testing.server.Script): the same replies, the same token counts, the same
bill. It is registered with litellm as the custom provider `skynet-double`, so a call to its
model (`skynet-double/skynet-test`) takes the whole of Skynet's model path (cache, budget
reservation, governor, retries, ledger, meter) and only the HTTP exchange is left out: no
socket, no server thread, no connection set-up per call.

    with ModelDouble() as double:
        double.script(reply("Paris"), fail(429, retry_after=0.1), reply("Rome"))
        models = double.models(tmp_path)            # a skynet Models session using it
        models.complete("task", [{"role": "user", "content": "capital of France?"}])

A project reaches it by naming `double.model` as its task and reflection model (no api_base).
What it cannot stand in for: a call made in another process (executor = "processes" or "ray",
a `skynet` CLI subprocess), embeddings, and a server that crashes or drips its reply on a real
connection; those tests keep the loopback server.

A fail() step raises what litellm raises for that status from an OpenAI-compatible server (its
own exception mapping, Retry-After included); a hang() waits `latency_s` (Skynet's time-out
fires first, as it does on a real connection) and is billed as the server bills it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from skynet.testing.server import Script, Step

__all__ = ["ModelDouble", "DOUBLE_PROVIDER", "DOUBLE_MODEL"]

DOUBLE_PROVIDER = "skynet-double"  # the litellm custom provider the doubles answer under
DOUBLE_MODEL = f"{DOUBLE_PROVIDER}/skynet-test"  # the default double's litellm model name

# name → the double installed under it; the newest install of a name answers it.
_installed: dict[str, list[ModelDouble]] = {}
_install_lock = threading.Lock()
_registered = False


def _register() -> None:
    """Register the `skynet-double` provider with litellm once per process."""
    global _registered
    with _install_lock:
        if _registered:
            return
        from litellm.llms.custom_llm import CustomLLM

        from skynet.models._litellm import litellm

        class DoubleLLM(CustomLLM):
            def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
                return _double_for(model)._complete(model, messages, kwargs)

        litellm.custom_provider_map = [
            *[p for p in litellm.custom_provider_map if p.get("provider") != DOUBLE_PROVIDER],
            {"provider": DOUBLE_PROVIDER, "custom_handler": DoubleLLM()},
        ]
        # litellm reads the map on its next completion; names are checked (Models.check_names)
        # before any call, so it is read now.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
        _registered = True


def _double_for(model: str) -> ModelDouble:
    name = model.split("/", 1)[1] if model.startswith(f"{DOUBLE_PROVIDER}/") else model
    with _install_lock:
        doubles = _installed.get(name)
        if doubles:
            return doubles[-1]
    from litellm import exceptions as errors

    raise errors.NotFoundError(
        message=f"no ModelDouble named '{name}' is installed: start one with "
        f"ModelDouble(name='{name}').install() (or `with ModelDouble(...)`)",
        model=model,
        llm_provider=DOUBLE_PROVIDER,
    )


class ModelDouble(Script):
    """A scripted model answered in-process, under litellm's `skynet-double` provider.

    It keeps what ScriptedServer keeps for assertions: `requests` (each request's body as an
    OpenAI client would send it: model, messages and parameters), `request_headers` (an api_key
    given is seen as "authorization"), `request_count`, and `bill()` / `billed_usd`.

    Args:
        default: the step served when the script is empty (None: reply "ok").
        responder: called with each request body when the script is empty; returns a Step.
            Wins over `default`.
        count_tokens: the prompt tokens reported for a request's text, when its step gives
            none (default: whitespace words).
        name: the model's name under the provider: `model` is "skynet-double/NAME".
    """

    def __init__(
        self,
        default: Step | None = None,
        responder: Callable[[dict[str, Any]], Step] | None = None,
        count_tokens: Callable[[str], int] | None = None,
        *,
        name: str = "skynet-test",
    ) -> None:
        super().__init__(default, responder, count_tokens)
        self.name = name
        self._closing = threading.Event()

    @property
    def model(self) -> str:
        """The litellm model name that reaches this double."""
        return f"{DOUBLE_PROVIDER}/{self.name}"

    # -- lifecycle ---------------------------------------------------------------------------
    def install(self) -> ModelDouble:
        """Answer calls to `model` from now on (until uninstall())."""
        _register()
        self._closing.clear()
        with _install_lock:
            _installed.setdefault(self.name, []).append(self)
        return self

    def uninstall(self) -> None:
        """Stop answering; a hang() in progress ends at once (as a stopped server's does)."""
        self._closing.set()
        with _install_lock:
            doubles = _installed.get(self.name, [])
            if self in doubles:
                doubles.remove(self)
            if not doubles:
                _installed.pop(self.name, None)

    def __enter__(self) -> ModelDouble:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- answering ---------------------------------------------------------------------------
    def _complete(self, model: str, messages: list[Any], kwargs: dict[str, Any]) -> Any:
        """Answer one litellm completion as the loopback server answers its HTTP request."""
        from skynet.models._litellm import litellm

        params = {
            k: v for k, v in dict(kwargs.get("optional_params") or {}).items() if k != "max_retries"
        }
        body: dict[str, Any] = {"model": model, "messages": list(messages), **params}
        api_key = kwargs.get("api_key")
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        step = self._next(body, headers)
        if step.kind == "hang":
            self._bill_abandoned(body)
        if step.latency_s:
            self._closing.wait(step.latency_s)
        if step.kind == "hang":
            raise _status_error(model, None, "the double hung up without a reply")
        if step.kind == "fail":
            raise _status_error(model, step, f"scripted {step.status}")
        payload = self._completion(step, body)
        if step.drip_s and self._closing.wait(step.drip_s * len(str(payload))):
            raise _status_error(model, None, "the double stopped mid-reply")
        usage = payload.get("usage")
        return litellm.ModelResponse(
            id=payload["id"],
            created=payload["created"],
            model=model,
            choices=payload["choices"],
            **({"usage": litellm.Usage(**usage)} if usage else {}),
        )

    # -- a skynet session using this double ------------------------------------------------
    def _session_model(self) -> tuple[str, dict[str, Any]]:
        if self not in _installed.get(self.name, []):
            self.install()
        return self.model, {}

    def models_table(
        self, *, input_per_mtok: float = 1.0, output_per_mtok: float = 2.0, timeout_s: float = 10
    ) -> dict[str, Any]:
        """skynet.toml's [models] table (or skynet.optimize's `models=`) using this double."""
        return {
            "task": self.model,
            "reflection": self.model,
            "endpoints": {self.model: {"timeout_s": timeout_s}},
            "prices": {
                self.model: {"input_per_mtok": input_per_mtok, "output_per_mtok": output_per_mtok}
            },
        }


def _status_error(model: str, step: Step | None, message: str) -> Exception:
    """What litellm raises for this failure from an OpenAI-compatible server: an error status
    (with its Retry-After) mapped by litellm's own exception mapping, or a lost connection."""
    import httpx
    from litellm import exceptions as errors
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type
    from litellm.llms.openai.common_utils import OpenAIError

    name = model.split("/", 1)[-1]
    if step is None:
        return errors.APIConnectionError(
            message=f"Connection error: {message}", llm_provider="openai", model=name
        )
    request = httpx.Request("POST", f"http://{DOUBLE_PROVIDER}/v1/chat/completions")
    headers = {} if step.retry_after is None else {"retry-after": f"{step.retry_after:g}"}
    response = httpx.Response(step.status, headers=headers, request=request)
    try:
        exception_type(
            model=name,
            custom_llm_provider="openai",
            original_exception=OpenAIError(
                status_code=step.status,
                message=message,
                headers=response.headers,
                request=request,
                response=response,
            ),
        )
    except Exception as exc:  # noqa: BLE001 — exception_type raises the mapped exception
        return exc
    return errors.APIError(  # not reached: exception_type always raises
        status_code=step.status, message=message, llm_provider="openai", model=name
    )
