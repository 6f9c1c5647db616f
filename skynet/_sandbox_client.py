"""skynet_sandbox: the one channel out of a code candidate's sandbox, for model calls.

Inside the sandbox a candidate imports it as `skynet_sandbox` (standard library only):

    from skynet_sandbox import complete

    def run(input):
        return complete(f"What is the capital of {input['country']}?", max_tokens=20)

Every call goes to Skynet, outside the sandbox, over a Unix socket; Skynet makes it through its
model layer as the task role: metered into this item's time and cost, cached, rate-limited and
budgeted. The candidate holds no key and cannot fake what a call cost.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

__all__ = ["complete", "chat", "ModelCallFailed"]

_SOCKET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "model.sock")
# Skynet's bound on one request (skynet.sandbox._proxy._MAX_REQUEST_BYTES): it refuses longer.
_MAX_REQUEST_BYTES = 1 << 20


class ModelCallFailed(RuntimeError):
    """The model call was refused or failed (the message says why)."""


def chat(messages: list[dict[str, str]], **params: Any) -> dict[str, Any]:
    """One chat call: messages [{"role", "content"}], params max_tokens, temperature, top_p,
    stop, seed. Returns {"text", "input_tokens", "output_tokens", "finish_reason"}.

    Raises:
        ModelCallFailed: Skynet refused the call or the model failed.
    """
    request = json.dumps({"messages": messages, **params}, ensure_ascii=True) + "\n"
    if len(request) > _MAX_REQUEST_BYTES:
        raise ModelCallFailed(
            f"a model request of more than {_MAX_REQUEST_BYTES:,} bytes (1 MiB, ~256k tokens: "
            f"past most models' context window) is refused; this one is {len(request):,} bytes; "
            "send a shorter prompt"
        )
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(_SOCKET)
            conn.sendall(request.encode())
            reply = conn.makefile("rb").readline()
    except OSError as exc:
        raise ModelCallFailed(f"no model channel: {exc}") from None
    try:
        answer = json.loads(reply)
    except ValueError:
        raise ModelCallFailed("the model channel closed without a reply") from None
    if "error" in answer:
        raise ModelCallFailed(answer["error"])
    return answer


def complete(prompt: str | list[dict[str, str]], **params: Any) -> str:
    """The reply text to a prompt (a user message) or to a list of chat messages."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    return chat(messages, **params)["text"]
