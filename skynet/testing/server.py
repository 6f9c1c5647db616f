"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API from a script.

Use it to test metrics, prompts and Skynet itself without a network or a key: each request takes
the next scripted step (a reply with usage, an error status with Retry-After, a latency, a hang).

    with ScriptedServer() as server:
        server.script(reply("Paris"), fail(429, retry_after=0.1), reply("Rome", latency_s=0.2))
        models = server.models(tmp_path)          # a skynet Models session pointed at it
        models.complete("task", [{"role": "user", "content": "capital of France?"}])

It can bill like a real server: after `server.bill(input_per_mtok=1.0, output_per_mtok=2.0)`,
`server.billed_usd` is what the tokens it reported cost, and (as a real server does) it reports
no more completion tokens than a request's max_tokens; a test can hold Skynet's figures to it.
A request the client abandoned (a hang() it timed out on) is billed too, at its prompt and its
max_tokens, as a hosted provider bills a request it finished for nobody.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["Script", "ScriptedServer", "Step", "reply", "fail", "hang", "MODEL"]

MODEL = "openai/skynet-test"  # the litellm name tests use for the scripted model


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One scripted answer. Build it with reply(), fail() or hang()."""

    kind: str  # "reply" | "fail" | "hang"
    text: str = ""
    status: int = 200
    retry_after: float | None = None
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    tool_calls: tuple[tuple[str, str], ...] = ()  # (name, raw arguments text)
    usage: bool = True  # False: the reply carries no `usage` (some servers send none)
    drip_s: float = 0.0  # > 0: the body goes out one byte every drip_s seconds


def reply(
    text: str,
    *,
    latency_s: float = 0.0,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    finish_reason: str | None = None,
    tool_calls: Sequence[tuple[str, str]] = (),
    usage: bool = True,
    drip_s: float = 0.0,
) -> Step:
    """A 200 reply. Token counts default to whitespace word counts of the prompt and the text.

    Args:
        tool_calls: (name, arguments text) pairs, sent as OpenAI tool_calls exactly as given.
        finish_reason: default "tool_calls" when there are calls, else "stop".
        usage: False sends no `usage` object (the tokens, hence the cost, are unknown).
        drip_s: send the body one byte every drip_s seconds (a server that stalls mid-reply).
    """
    return Step(
        kind="reply",
        text=text,
        latency_s=latency_s,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        tool_calls=tuple((name, arguments) for name, arguments in tool_calls),
        usage=usage,
        drip_s=drip_s,
    )


def fail(status: int, *, retry_after: float | None = None, latency_s: float = 0.0) -> Step:
    """An error status (429, 500, 503, 400, ...), with a Retry-After header when given."""
    return Step(kind="fail", status=status, retry_after=retry_after, latency_s=latency_s)


def hang(seconds: float = 30.0) -> Step:
    """Accept the request and say nothing for `seconds` (the client's time-out should fire)."""
    return Step(kind="hang", latency_s=seconds)


def _message(step: Step) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text}
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for index, (name, arguments) in enumerate(step.tool_calls)
        ]
    return message


def _prompt_text(messages: list[dict[str, Any]]) -> str:
    return "\n".join(m["content"] for m in messages if isinstance(m.get("content"), str))


def _word_count(text: str) -> int:
    return len(text.split())


_S = TypeVar("_S", bound="Script")


class Script:
    """The script, the requests seen and the bill: what the loopback server and the in-process
    double (skynet.testing.double) share, so both answer a script with the same replies and
    count its tokens and cost the same way.

    Args:
        default: the step served when the script is empty (None: reply "ok").
        responder: called with each request body when the script is empty; returns a Step.
            Wins over `default`.
        count_tokens: the prompt tokens reported for a request's text, when its step gives
            none (default: whitespace words).
    """

    def __init__(
        self,
        default: Step | None = None,
        responder: Callable[[dict[str, Any]], Step] | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.default = default or reply("ok")
        self.responder = responder
        self.count_tokens = count_tokens or _word_count
        self.input_per_mtok = 0.0
        self.output_per_mtok = 0.0
        self._billed_usd = 0.0
        self.billing = False
        self.requests: list[dict[str, Any]] = []
        # Each chat request's headers (names in lower case), as `requests` holds its body: an
        # api_key sent is seen ("authorization").
        self.request_headers: list[dict[str, str]] = []
        self._steps: deque[Step] = deque()
        self._lock = threading.Lock()

    # -- script ------------------------------------------------------------------------------
    def script(self: _S, *steps: Step) -> _S:
        """Queue steps; each request takes the next one."""
        with self._lock:
            self._steps.extend(steps)
        return self

    def _next(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Step:
        with self._lock:
            self.requests.append(body)
            self.request_headers.append(headers or {})
            if self._steps:
                return self._steps.popleft()
        if self.responder is not None:
            return self.responder(body)
        return self.default

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    # -- billing -----------------------------------------------------------------------------
    def bill(self: _S, *, input_per_mtok: float, output_per_mtok: float) -> _S:
        """Bill every reply from now on at these prices (USD per million tokens reported), and
        report at most a request's max_tokens of completion tokens."""
        with self._lock:
            self.input_per_mtok, self.output_per_mtok = input_per_mtok, output_per_mtok
            self.billing = True
        return self

    @property
    def billed_usd(self) -> float:
        """What the replies sent so far cost, at the billed prices, by the tokens reported."""
        with self._lock:
            return self._billed_usd

    def _charge(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self._billed_usd += (
                prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
            ) / 1e6

    def _bill_abandoned(self, body: dict[str, Any]) -> None:
        """Bill a hang() as a hosted provider bills a request its client abandons: the prompt
        and up to max_tokens of reply (billed as it arrives, so a test reads the bill as soon
        as the client gave up)."""
        if not self.billing:
            return
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        self._charge(
            self.count_tokens(_prompt_text(body.get("messages") or [])),
            cap if isinstance(cap, int) and cap > 0 else 0,
        )

    # -- a skynet session using this script ------------------------------------------------
    def _session_model(self) -> tuple[str, dict[str, Any]]:
        """The litellm model name a session reaches this script under, and how to reach it
        (ModelSettings fields: the server's address and key; nothing for the double)."""
        raise NotImplementedError

    def models(
        self,
        cache_dir: Path | str | None = None,
        *,
        input_per_mtok: float | None = 1.0,
        output_per_mtok: float | None = 2.0,
        timeout_s: float = 10.0,
        max_concurrent: int = 8,
        rpm: float | None = None,
        max_attempts: int = 4,
        base_delay_s: float = 0.01,
        metric_model: str = "",
        max_cost_usd: float | None = None,
    ) -> Any:
        """A skynet Models session whose every role uses this script's model.

        Args:
            cache_dir: where the call cache goes (None: in memory, for this session only).
            input_per_mtok, output_per_mtok: the declared price (None for both: unpriced).
            metric_model: another model name the metric role uses, served the same way.
            max_cost_usd: the session's money budget (None: none).
        """
        from skynet.models import Models, ModelsConfig, ModelSettings, Price, RetryPolicy

        model, endpoint = self._session_model()
        price = (
            Price(input_per_mtok=input_per_mtok, output_per_mtok=output_per_mtok)
            if input_per_mtok is not None and output_per_mtok is not None
            else None
        )
        settings = ModelSettings(
            **endpoint, timeout_s=timeout_s, max_concurrent=max_concurrent, rpm=rpm, price=price
        )
        all_settings = {model: settings}
        if metric_model:
            all_settings[metric_model] = settings
        return Models(
            ModelsConfig(
                task=model,
                reflection=model,
                metric=metric_model,
                settings=all_settings,
                cache_path=None if cache_dir is None else Path(cache_dir) / "cache.db",
                retry=RetryPolicy(max_attempts=max_attempts, base_delay_s=base_delay_s),
                max_cost_usd=max_cost_usd,
            )
        )

    def _completion(self, step: Step, body: dict[str, Any]) -> dict[str, Any]:
        """The JSON of the chat-completion reply a reply() step makes to `body`, billed."""
        messages = body.get("messages") or []
        prompt = (
            step.prompt_tokens
            if step.prompt_tokens is not None
            else self.count_tokens(_prompt_text(messages))
        )
        completion = (
            step.completion_tokens if step.completion_tokens is not None else len(step.text.split())
        )
        finish_reason = step.finish_reason
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        if self.billing and isinstance(cap, int) and 0 < cap < completion:
            completion, finish_reason = cap, "length"  # a server stops at max_tokens
        self._charge(prompt, completion)
        payload: dict[str, Any] = {
            "id": f"chatcmpl-scripted-{self.request_count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": _message(step), "finish_reason": finish_reason}],
        }
        if step.usage:
            payload["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return payload


class ScriptedServer(Script):
    """The loopback OpenAI-compatible server.

    Args:
        default: the step served when the script is empty (None: reply "ok").
        responder: called with each request body when the script is empty; returns a Step.
            Wins over `default`.
        embeddings: serves POST /v1/embeddings: called with each input text, returns its vector
            (None: that route answers 404). Embedding requests are recorded in `requests` but
            take no scripted step.
        count_tokens: the prompt tokens reported for a request's text, when its step gives
            none (default: whitespace words).
        port: the loopback port to listen on (0: any free one); a restarted server takes the
            port its predecessor had, so a project's api_base still reaches it.
    """

    def __init__(
        self,
        default: Step | None = None,
        responder: Callable[[dict[str, Any]], Step] | None = None,
        embeddings: Callable[[str], Sequence[float]] | None = None,
        count_tokens: Callable[[str], int] | None = None,
        port: int = 0,
    ) -> None:
        super().__init__(default, responder, count_tokens)
        self.port = port
        self._connections: set[socket.socket] = set()
        self.embeddings = embeddings
        self._closing = threading.Event()
        self._crashed = threading.Event()  # crash(): every request from here on is dropped
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _embed(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON of an OpenAI embeddings reply (float or base64 encoding)."""
        with self._lock:
            self.requests.append(body)
        if self.embeddings is None:
            return 404, {
                "error": {"message": "no embeddings responder: ScriptedServer(embeddings=...)"}
            }
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        data = []
        for index, text in enumerate(texts):
            vector = [float(x) for x in self.embeddings(str(text))]
            if body.get("encoding_format") == "base64":
                # The OpenAI client asks for base64 of little-endian float32 unless told otherwise.
                packed: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
            else:
                packed = vector
            data.append({"object": "embedding", "index": index, "embedding": packed})
        tokens = sum(self.count_tokens(str(t)) for t in texts)
        self._charge(tokens, 0)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model", "scripted"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The base URL to give a client (ends in /v1)."""
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body go out in two writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every reply.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                with server._lock:
                    server._connections.add(self.connection)

            def finish(self) -> None:
                with server._lock:
                    server._connections.discard(self.connection)
                try:
                    super().finish()
                except OSError:
                    pass  # crash() closed the connection under it

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:  # noqa: N802 — the http.server API
                if server._crashed.is_set():  # a dead server answers nothing
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "body is not JSON"}})
                    return
                if self.path.rstrip("/").endswith("/embeddings"):
                    self._send(*server._embed(body))
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                step = server._next(body, {k.lower(): v for k, v in self.headers.items()})
                if step.kind == "hang":
                    server._bill_abandoned(body)
                if step.latency_s:
                    server._closing.wait(step.latency_s)
                if step.kind == "hang":
                    self.close_connection = True
                    return
                if step.kind == "fail":
                    headers = {}
                    if step.retry_after is not None:
                        headers["Retry-After"] = f"{step.retry_after:g}"
                    self._send(
                        step.status,
                        {"error": {"message": f"scripted {step.status}", "type": "scripted"}},
                        headers,
                    )
                    return
                payload = server._completion(step, body)
                self._send(200, payload, drip_s=step.drip_s)

            def _send(
                self,
                status: int,
                payload: dict[str, Any],
                headers: dict[str, str] | None = None,
                *,
                drip_s: float = 0.0,
            ) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    if not drip_s:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        if server._closing.wait(drip_s):
                            return
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a time-out test): nothing to tell it

        class Server(ThreadingHTTPServer):
            # The default backlog of 5 drops connections under 16 concurrent clients, and each
            # dropped one costs the client a full second before it retries.
            request_queue_size = 128

            def handle_error(self, request: Any, client_address: Any) -> None:
                if isinstance(sys.exc_info()[1], OSError):
                    return  # a connection dropped (a crash(), a client that gave up): no noise
                super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        # The accept loop checks for shutdown every 0.05 s (the default, 0.5 s, made each stop()
        # wait half a second: a minute and a half of the fast test layer).
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="skynet-scripted-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        with self._lock:  # a crash() on another thread may stop it at the same time
            httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def crash(self) -> None:
        """Die as a crashed server does: stop listening and drop every open connection (stop()
        lets a kept-alive connection go on being served). At once: a request that arrives
        while the accept loop winds down (it polls every 0.05 s) is dropped unanswered."""
        self._crashed.set()
        self._closing.set()
        with self._lock:
            httpd, self._httpd = self._httpd, None
            connections = list(self._connections)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed
        if httpd is not None:
            httpd.shutdown()  # no connection is accepted from here on
            # Last: closing the server joins its handler threads, which a kept-alive connection
            # would hold open for ever (a crash that waited for them would never happen).
            httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- a skynet session pointed at this server -------------------------------------------
    def _session_model(self) -> tuple[str, dict[str, Any]]:
        return MODEL, {"api_base": self.url, "api_key": "sk-loopback"}
