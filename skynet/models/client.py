"""Every model call, for every role, goes through Models.complete() (embeddings: Models.embed()).

The path: cache lookup → budget reservation (worst-case cost; refused past max_cost_usd) →
governor slot → litellm call with retries (exponential backoff with jitter on 429, 5xx,
connection errors and time-outs, honouring Retry-After; each retry reserves again, and a failed
attempt the provider may have billed keeps its reservation as spent) → cost from the price →
the reservation settled to it → the role's ledger (request and reply texts bounded per call and
per evaluation) → the meter of the item being evaluated (task role only) → cache store. The
ledger comes before the cache: a paid call is recorded before anything that could fail.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import math
import os
import random
import re
import sqlite3
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns as _clock_ns
from time import sleep as _sleep
from time import thread_time_ns as _thread_cpu_ns
from typing import Any

from skynet.errors import (
    REQUEST_FAULT,
    SERVICE_FAULT,
    SETUP_FAULT,
    BudgetExhausted,
    ConfigError,
    ModelError,
)
from skynet.measure import CallFigures, active_meter
from skynet.models.budget import (
    DEFAULT_MAX_TOKENS,
    Budget,
    Hold,
    Reservation,
    count_text_tokens,
    worst_case_usd,
    worst_input_tokens,
)
from skynet.models.cache import CachedCall, CallCache, cache_key
from skynet.models.flight import KeyLocks, cache_lock_path
from skynet.models.governor import Governor
from skynet.models.ledger import (
    CALL_TEXT_BYTES,
    EVALUATION_TEXT_BYTES,
    ROLES,
    CallRecord,
    Ledger,
    kept_text,
)
from skynet.models.local import EMBEDDED_MODEL
from skynet.models.pricing import Price, lookup_price

__all__ = [
    "RetryPolicy",
    "ModelSettings",
    "ModelsConfig",
    "Reply",
    "Embeddings",
    "Models",
    "configure",
    "current",
    "using",
]

# Parameters that change a reply (and so belong in the cache key). Transport settings don't.
_REPLY_PARAMS = (
    "temperature",
    "max_tokens",
    "top_p",
    "stop",
    "seed",
    "response_format",
    "tools",
    "tool_choice",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Retries for transient failures: 429, 5xx, connection errors, time-outs.

    Delay before attempt n+1 is uniform in [0, min(max_delay_s, base_delay_s * 2**n)] (full
    jitter), or the server's Retry-After when it sent one (capped at max_retry_after_s).
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return min(max(0.0, retry_after), self.max_retry_after_s)
        return rng.uniform(0, min(self.max_delay_s, self.base_delay_s * 2**attempt))


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """How to reach and limit one model.

    Attributes:
        api_base: the server's base URL (e.g. "http://127.0.0.1:8000/v1"), or None for the
            provider's default.
        api_key: the key, or None to let litellm read the provider's usual variable.
        timeout_s: per-attempt time-out.
        max_concurrent: calls in flight at once (the governor).
        rpm: requests per minute, or None.
        price: declared price (wins over litellm's table).
    """

    api_base: str | None = None
    api_key: str | None = None
    timeout_s: float = 120.0
    max_concurrent: int = 8
    rpm: float | None = None
    price: Price | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelsConfig:
    """Which model serves each role, and how to reach each model.

    The embedded `local/smollm2` is the default for every role. `metric` empty means: the
    reflection model. `cache_path` None keeps the call cache in memory for the session only.
    `max_cost_usd` is the money budget of every call of the session, all roles together (None:
    none); see skynet.models.budget.
    """

    task: str = EMBEDDED_MODEL
    reflection: str = EMBEDDED_MODEL
    metric: str = ""
    settings: Mapping[str, ModelSettings] = field(default_factory=dict)
    cache_path: Path | str | None = Path(".skynet") / "cache.db"
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_cost_usd: float | None = None
    # Calls in flight at once for a model declared nowhere ([engine] concurrency, from a config).
    default_max_concurrent: int = 8

    def model_for(self, role: str) -> str:
        if role not in ROLES:
            raise ConfigError(f"unknown model role '{role}'; roles: {', '.join(ROLES)}")
        if role == "metric":
            return self.metric or self.reflection
        return getattr(self, role)

    def settings_for(self, model: str) -> ModelSettings:
        """The model's settings: declared, else the defaults (embedded: one call at a time)."""
        found = self.settings.get(model)
        if found is not None:
            return found
        if model.startswith("local/"):
            # One llama.cpp context per process: calls queue in the governor, not in the lock.
            return ModelSettings(max_concurrent=1, price=Price(input_per_mtok=0, output_per_mtok=0))
        return ModelSettings(max_concurrent=self.default_max_concurrent)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A model's reply with what Skynet measured of the call."""

    text: str
    model: str
    role: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_note: str
    elapsed_ms: float
    cached: bool
    finish_reason: str = "stop"
    attempts: int = 1
    tool_calls: tuple[dict[str, str], ...] = ()  # each {"name", "arguments" (raw JSON text)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Embeddings:
    """An embedding model's vectors (one per text, in order) with what Skynet measured."""

    vectors: list[list[float]]
    model: str
    role: str
    input_tokens: int
    cost_usd: float | None
    elapsed_ms: float
    attempts: int = 1


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    for holder in (getattr(exc, "response", None), exc):
        headers = getattr(holder, "headers", None)
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
        except AttributeError:
            continue
        if value is None:
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            return None
    return None


def _transient(exc: BaseException) -> bool:
    from litellm import exceptions as errors

    transient = (
        errors.Timeout,
        errors.APIConnectionError,
        errors.RateLimitError,
        errors.InternalServerError,
        errors.ServiceUnavailableError,
    )
    if isinstance(exc, transient):
        return True
    status = _status_of(exc)
    return status is not None and (status == 429 or status >= 500)


def _links(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from, outermost first."""
    links: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in links) and len(links) < 32:
        links.append(link)
        link = link.__cause__ or link.__context__
    return links


def _may_be_billed(exc: BaseException) -> bool:
    """Whether a failed attempt may have been billed: True unless the request never reached the
    provider (the connection was refused or never made) or the provider refused it with a 4xx
    (429 included), a reply that reports no usage. A time-out, a reply cut off, a connection
    lost after sending and a 5xx may all be billed: a hosted provider finishes and bills a
    request its client abandoned."""
    import httpx
    from litellm import exceptions as errors

    links = _links(exc)
    if any(isinstance(link, httpx.ConnectError | httpx.ConnectTimeout) for link in links):
        return False  # no connection was made: nothing was sent
    if any(isinstance(link, errors.Timeout | httpx.TimeoutException) for link in links):
        return True  # litellm calls a time-out a 408; the provider said nothing
    for link in links:
        if isinstance(link, httpx.HTTPStatusError):  # the provider's own reply
            return not 400 <= link.response.status_code < 500
    status = _status_of(exc)
    return status is None or not 400 <= status < 500


_SETUP_STATUS = (401, 402, 403, 404, 407)  # a key, payment, access right or model name


def _fault_of(exc: BaseException) -> str:
    """Whose fault a failed call was (skynet.errors FAULTS): the service's when a retry could
    fix it (429, 5xx, connection, time-out); the configuration's for a key, access or model
    name the provider refused; otherwise the request's own (a 4xx for what it held, or a
    parameter refused before it was sent): the failure of whoever wrote the request."""
    if _transient(exc):
        return SERVICE_FAULT
    from litellm import exceptions as errors

    if isinstance(exc, (errors.AuthenticationError, errors.PermissionDeniedError)):
        return SETUP_FAULT
    status = _status_of(exc)
    if status in _SETUP_STATUS or (status is None and isinstance(exc, errors.NotFoundError)):
        return SETUP_FAULT
    if status is None and isinstance(exc, errors.APIError | errors.APIConnectionError):
        return SERVICE_FAULT  # the provider failed without saying how: not the request's doing
    return REQUEST_FAULT


class Models:
    """A model session: config, call cache, one governor per model, one ledger per role.

    Args:
        config: the models configuration.
        base_dir: relative cache paths are resolved against it (the project folder).
    """

    def __init__(
        self,
        config: ModelsConfig | None = None,
        *,
        base_dir: Path | None = None,
        budget: Budget | None = None,
        governor: Callable[[str], Governor] | None = None,
    ) -> None:
        """`budget` and `governor` (model name -> its Governor) replace the session's own: a
        worker process holds its calls to the run's one budget and governors (skynet.executors)."""
        self.config = config or ModelsConfig()
        self._governor_of = governor
        self.ledgers = {role: Ledger(role) for role in ROLES}
        self._governors: dict[str, Governor] = {}
        self._adopted: dict[str, ModelSettings] = {}  # a program's own LMs (adopt())
        self._lock = threading.Lock()
        self._listeners: list[Callable[[CallRecord], None]] = []
        self._rng = random.Random(0)
        self._inflight: dict[str, list[Any]] = {}  # key -> [its lock, threads holding or waiting]
        # The bytes of call text each evaluation in progress (its meter) may still keep.
        self._evaluation_text: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._call_text_bytes = CALL_TEXT_BYTES
        self._evaluation_text_bytes = EVALUATION_TEXT_BYTES
        self.budget = budget if budget is not None else Budget(self.config.max_cost_usd)
        cache_path = self.config.cache_path
        if cache_path is None or str(cache_path) == ":memory:":
            # Still a cache: llm()'s promise (one call, one verdict) must hold in every session.
            self.cache = CallCache(":memory:")
        else:
            path = Path(cache_path)
            if not path.is_absolute():
                path = (base_dir or Path.cwd()) / path
            self.cache = CallCache(path)
        # A twin call in another process (a dry run beside a run) waits for this one's reply.
        self._key_locks = KeyLocks(
            None if self.cache.path == ":memory:" else cache_lock_path(self.cache.path)
        )

    # -- settings -------------------------------------------------------------------------
    def settings(self, model: str) -> ModelSettings:
        adopted = self._adopted.get(model)
        declared = self.config.settings.get(model)
        if adopted is None:
            return self.config.settings_for(model)
        if declared is None:
            return adopted
        if declared.api_base is None and declared.api_key is None:
            # Declared for its price or limits only: reached as the adopted LM says.
            return dataclasses.replace(declared, api_base=adopted.api_base, api_key=adopted.api_key)
        return declared

    def adopt(self, model: str, *, api_base: str | None, api_key: str | None) -> None:
        """Reach `model` as a program's own LM says (its api_base and key) when skynet.toml
        declares no endpoint for it: its calls then take Skynet's path (cache, governor, ledger,
        budget) under the role they are made in. A declared endpoint (an api_base or key) wins;
        a model declared for its price or limits only is reached as the LM says, at them.

        Raises:
            ConfigError: under a money budget, the model has no known price (said before any
                call: its calls could not be held to the budget).
        """
        if model in self._adopted:
            return
        with self._lock:
            self._adopted[model] = ModelSettings(api_base=api_base, api_key=api_key)
        if model in self.config.settings:
            return
        if self.budget.limited and self.price(model) is None:
            raise _unpriced("program's own LM", model, self.config.max_cost_usd)

    def price(self, model: str) -> Price | None:
        declared = self.settings(model).price
        if declared is not None:
            return declared
        if model.startswith("local/"):
            return Price(input_per_mtok=0, output_per_mtok=0)
        return lookup_price(model)

    def check_budget_prices(self) -> None:
        """Under a money budget, refuse (before any call) a role whose model has no known price:
        its calls could not be held to the budget.

        Raises:
            ConfigError: naming the role(s), the model and how to declare its price.
        """
        if not self.budget.limited:
            return
        roles: dict[str, list[str]] = {}
        for role in ROLES:
            name = self.config.model_for(role)
            if name:
                roles.setdefault(name, []).append(role)
        for name, used_by in roles.items():
            if self.price(name) is None:
                raise _unpriced(" and ".join(used_by), name, self.config.max_cost_usd)

    def check_names(self) -> None:
        """Refuse (before any call) a role's model whose name names no provider litellm knows
        ("gpt-nothing"): every call would be refused, and not for anything a candidate did.

        Raises:
            ConfigError: naming the role(s), the model and how to write its name.
        """
        roles: dict[str, list[str]] = {}
        for role in ROLES:
            name = self.config.model_for(role)
            if name and not name.startswith("local/"):
                roles.setdefault(name, []).append(role)
        if not roles:
            return
        from skynet.models._litellm import litellm

        for name, used_by in roles.items():
            try:
                litellm.get_llm_provider(name, api_base=self.settings(name).api_base)
            except Exception:  # noqa: BLE001 — litellm says "no provider" in several types
                raise ConfigError(
                    f"the {' and '.join(used_by)} model '{name}' names no provider litellm "
                    "knows: write it as PROVIDER/MODEL (e.g. openai/gpt-4o-mini; openai/NAME "
                    "for an OpenAI-compatible server at an api_base) in skynet.toml [models] "
                    "or the --task-model / --reflection-model flag"
                ) from None

    def _budget_price(self, role: str, model: str) -> Price:
        price = self.price(model)
        if price is None:
            raise _unpriced(role, model, self.config.max_cost_usd)
        return price

    def governor(self, model: str) -> Governor:
        if self._governor_of is not None:
            return self._governor_of(model)
        with self._lock:
            gov = self._governors.get(model)
            if gov is None:
                s = self.settings(model)
                gov = Governor(s.max_concurrent, s.rpm)
                self._governors[model] = gov
            return gov

    def subscribe(self, listener: Callable[[CallRecord], None]) -> None:
        """Call `listener` with every CallRecord (the run store records them)."""
        self._listeners.append(listener)

    @contextlib.contextmanager
    def overheard(self) -> Iterator[list[CallRecord]]:
        """The CallRecords made while the block runs, in a list (the self-test's calls, made
        before the run that records them exists)."""
        heard: list[CallRecord] = []
        self._listeners.append(heard.append)
        try:
            yield heard
        finally:
            self._listeners.remove(heard.append)

    def absorb(self, record: CallRecord) -> None:
        """A call another process made for this session (a worker's): counted in its role's
        ledger and passed to the listeners, as this session's own calls are."""
        self._record(record)

    def _record(self, record: CallRecord) -> None:
        record = self._bounded(record)
        self.ledgers[record.role].add(record)
        for listener in self._listeners:
            listener(record)

    def _bounded(self, record: CallRecord) -> CallRecord:
        """The record with its request and reply texts bounded: CALL_TEXT_BYTES each, and
        EVALUATION_TEXT_BYTES for all the calls of the evaluation in progress together (its
        meter's); past that, a text is kept as its size and sha256 only (ledger.kept_text)."""
        if not record.prompt and not record.reply:
            return record
        meter = active_meter()
        texts = []
        for text in (record.prompt, record.reply):
            size = len(text.encode("utf-8", "surrogatepass")) if len(text) * 4 > 1024 else 0
            keep = self._call_text_bytes
            if meter is not None:
                with self._lock:  # the evaluation's calls may be recorded at once
                    left = self._evaluation_text.get(meter, self._evaluation_text_bytes)
                    keep = min(keep, left)
                    self._evaluation_text[meter] = left - min(size or len(text), keep)
            texts.append(text if size <= keep and len(text) <= keep else kept_text(text, keep))
        if texts[0] is record.prompt and texts[1] is record.reply:
            return record
        return dataclasses.replace(record, prompt=texts[0], reply=texts[1])

    # -- the call path --------------------------------------------------------------------
    def complete(
        self,
        role: str,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        draw: int = 0,
        **params: Any,
    ) -> Reply:
        """Call the model serving `role` (or `model`) with chat messages.

        Args:
            role: "task", "reflection" or "metric"; decides the ledger and whether the meter
                counts the call (only task calls are in service_cost()).
            messages: OpenAI-style chat messages.
            model: overrides the role's model.
            draw: the draw index; part of the cache key (another index draws afresh).
            **params: temperature, max_tokens, top_p, stop, seed, ...

        Under a money budget, a call names its max_tokens (DEFAULT_MAX_TOKENS when the caller
        gave none) and reserves its worst-case cost before it is sent; a cache hit reserves
        nothing.

        Raises:
            ModelError: the call failed after retries, or failed in a way retries cannot fix.
            BudgetExhausted: the call's worst-case cost would pass max_cost_usd; it was not sent.
            ConfigError: under a money budget, the model has no known price.
        """
        name = model or self.config.model_for(role)
        if not name and role == "metric":
            # The reflection model stands in for an unset metric model; a callable one
            # (gepa's reflection_lm, given from Python) is the engine's to call, not llm()'s.
            raise ConfigError(
                "the metric role (skynet.llm() and judge calls) has no model: none is set, and "
                "the reflection model that stands in for it is a Python callable, which only the "
                'engine calls; add models={"metric": "PROVIDER/MODEL"} ([models] metric)'
            )
        if not name:
            raise ConfigError(f"no model is configured for the {role} role")
        params = {k: v for k, v in params.items() if v is not None}
        params.setdefault("temperature", 0.0)
        if (
            self.budget.limited
            and not _caps_output(params)
            and self._budget_price(role, name).output_per_mtok > 0
        ):
            params["max_tokens"] = DEFAULT_MAX_TOKENS  # the worst case must be a real bound
        key_params = {k: params[k] for k in sorted(params) if k in _REPLY_PARAMS}
        key = cache_key(name, messages, key_params, draw)
        item_id = getattr(active_meter(), "item_id", None)

        def cached() -> Reply | None:
            """The reply from the call cache, finished as a cached call; None on a miss."""
            looked_up = _clock_ns()
            hit = self.cache.get(key)
            if hit is None:
                return None
            lookup_ns = _clock_ns() - looked_up
            return self._finish(
                role,
                name,
                hit,
                cached=True,
                lookup_ns=lookup_ns,
                item_id=item_id,
                messages=messages,
            )

        meter = active_meter()
        if meter is not None:
            # The evaluation waits for the calls started under its meter: a call still in
            # flight when the candidate answered is the item's (and in the ledger) all the same.
            meter.call_started()
        try:
            reply = cached()
            if reply is not None:
                return reply
            with self._one_call_per_key(key):
                # A twin request (same key) that was in flight has stored its reply: use it.
                reply = cached()
                if reply is not None:
                    return reply
                return self._call(role, name, messages, params, key, item_id)
        finally:
            if meter is not None:
                meter.call_ended()

    @contextlib.contextmanager
    def _one_call_per_key(self, key: str) -> Iterator[None]:
        """Hold the key's lock: identical requests in flight at once make one call, not several
        (a cache miss in two threads at the same moment would otherwise pay twice)."""
        with self._lock:
            entry = self._inflight.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0], self._key_locks.hold(key):
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._inflight[key]

    def _call(
        self,
        role: str,
        name: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        key: str,
        item_id: str | None,
    ) -> Reply:
        """Reserve, call the model (governed, retried), record the call, then cache the reply."""
        prepared = _clock_ns()
        prepared_cpu = _thread_cpu_ns()
        _prepare(name)  # one-time set-up: not the model's time, so not the item's either
        setup_ns = _clock_ns() - prepared
        setup_cpu_ns = _thread_cpu_ns() - prepared_cpu  # nor its CPU time (the meter's floor)
        settings = self.settings(name)
        price = self.price(name)
        # Each attempt reserves its worst case; a failed one the provider may bill keeps it.
        hold = Hold(self.budget, lambda: self._reserve_call(role, name, messages, params))
        hold.take()
        asked = _clock_ns()  # the governor's wait starts here: the meter needs its interval
        try:
            response, attempts, elapsed_ns, waited_s = self._send(
                role,
                name,
                lambda: self._call_litellm(name, messages, params, settings, price),
                item_id,
                prompt=_json(messages),
                hold=hold,
            )
        except BaseException:
            hold.release()  # not sent (or interrupted): what _send did not settle is released
            raise
        if hold.kept_attempts:
            self._record_kept(role, name, hold, item_id=item_id, prompt=_json(messages))
        try:
            reply, in_tok, out_tok = _parse(response)
        except Exception as exc:  # noqa: BLE001 — a reply Skynet cannot read is still paid for
            in_tok, out_tok = _usage(response)
            cost = None if price is None else price.cost(in_tok, out_tok)
            hold.settle(cost)
            raise self._failed(
                role,
                name,
                exc,
                "sent a reply Skynet cannot read",
                attempts=attempts,
                elapsed_ns=elapsed_ns,
                item_id=item_id,
                input_tokens=in_tok,
                output_tokens=out_tok,
                cost_usd=cost,
                prompt=_json(messages),
                fault=SERVICE_FAULT,  # the reply, not the request, was at fault
            ) from exc
        # A reply that reports no tokens (no `usage`: litellm fills in zeros) has an unknown
        # cost, never $0; its reservation is held at the worst case: it was paid for.
        cost = None if price is None or not (in_tok or out_tok) else price.cost(in_tok, out_tok)
        hold.settle(cost)
        call = CachedCall(
            reply=reply,
            input_tokens=in_tok,
            output_tokens=out_tok,
            cost_usd=cost,
            elapsed_ns=elapsed_ns,
        )
        # The ledger first: whatever happens to the cache write, the paid call is recorded.
        result = self._finish(
            role,
            name,
            call,
            cached=False,
            attempts=attempts,
            item_id=item_id,
            excluded_ns=setup_ns + int(waited_s * 1e9),
            waits=((prepared, prepared + setup_ns), (asked, asked + int(waited_s * 1e9))),
            setup_cpu_ns=setup_cpu_ns,
            messages=messages,
        )
        self._cache_put(key, name, call)
        return result

    def worst_case_usd(
        self, role: str, messages: list[dict[str, Any]], *, max_tokens: int | None = None
    ) -> float | None:
        """What a reservation for this call would hold (None without a money budget): the
        input at its byte bound, the output at max_tokens (DEFAULT_MAX_TOKENS when unset)."""
        name = self.config.model_for(role)
        if not self.budget.limited or not name:
            return None
        price = self._budget_price(role, name)
        tokens = 0
        if price.input_per_mtok:
            tokens, _ = worst_input_tokens(name, messages)
        return worst_case_usd(price, tokens, max_tokens or DEFAULT_MAX_TOKENS)

    def _reserve_call(
        self, role: str, name: str, messages: list[dict[str, Any]], params: dict[str, Any]
    ) -> Reservation | None:
        """Hold the call's worst-case cost (None without a money budget)."""
        if not self.budget.limited:
            return None
        price = self._budget_price(role, name)
        cap = _caps_output(params) or 0
        if price.input_per_mtok == 0:
            tokens, how = 0, "free input"  # nothing to count: the input is free
        else:
            # At a bound no tokenizer can pass: the text is mostly what a candidate wrote.
            tokens, how = worst_input_tokens(name, messages, params.get("tools"))
        return self.budget.reserve(
            worst_case_usd(price, tokens, cap),
            role=role,
            model=name,
            detail=f"{how} and max_tokens {cap:,}",
        )

    def _kept_figures(self, role: str, name: str, hold: Hold | None) -> dict[str, Any]:
        """_failed()'s figures for a call whose failed attempts kept their reservations (the
        cost they were counted at, an upper bound, and the note saying so), charged to the
        item being evaluated; {} when nothing was kept."""
        if hold is None or not hold.kept_attempts:
            return {}
        self._charge_kept(role, name, hold.kept_usd)
        return {"cost_usd": hold.kept_usd, "note": hold.kept_note}

    def _record_kept(
        self, role: str, name: str, hold: Hold, *, item_id: str | None, prompt: str
    ) -> None:
        """Record the failed attempts of a call that kept their reservations, when the call
        itself did not end in their failure (a retry succeeded, or the budget refused one): a
        failed call in the role's ledger at the kept cost, charged to the item."""
        if not hold.kept_attempts:
            return
        exc = hold.last_error or RuntimeError("an attempt failed")
        self._failed(
            role,
            name,
            exc,
            f"failed on {hold.kept_attempts} attempt(s) before the last",
            attempts=hold.kept_attempts,
            elapsed_ns=hold.failed_ns,
            item_id=item_id,
            prompt=prompt,
            **self._kept_figures(role, name, hold),
        )

    def _charge_kept(self, role: str, name: str, usd: float) -> None:
        # The item's candidate started those attempts: what they were counted at is its cost.
        meter = active_meter()
        if role == "task" and meter is not None and usd > 0:
            meter.add_call(
                CallFigures(
                    model=name,
                    elapsed_ns=0,
                    input_tokens=0,
                    output_tokens=0,
                    cost_usd=usd,
                    cached=False,
                )
            )

    def _cache_put(self, key: str, name: str, call: CachedCall) -> None:
        """Store a reply; a store that fails loses the cache entry only, never the call."""
        try:
            self.cache.put(key, name, call)
        except (sqlite3.Error, UnicodeError, ValueError, TypeError) as exc:
            warnings.warn(
                f"the call cache could not store a reply of {name} ({type(exc).__name__}: "
                f"{_short(exc)}); the call is recorded, and a repeat of it will be paid again",
                RuntimeWarning,
                stacklevel=3,
            )

    def _failed(
        self,
        role: str,
        name: str,
        exc: BaseException,
        why: str,
        *,
        attempts: int,
        elapsed_ns: int,
        item_id: str | None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = None,
        prompt: str = "",
        fault: str | None = None,
        note: str = "",
    ) -> ModelError:
        """Record a failed call in the role's ledger; the ModelError that says why (and whose
        fault it was: `fault`, else judged from `exc`). `note` is added to the recorded error
        (what the failed attempts were counted at)."""
        cause = f"{type(exc).__name__}: {_short(exc)}"
        self._record(
            CallRecord(
                role=role,
                model=name,
                elapsed_ms=elapsed_ns / 1e6,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost_usd=cost_usd,
                attempts=attempts,
                ok=False,
                error=f"{cause}; {note}" if note else cause,
                item_id=item_id,
                prompt=prompt,
            )
        )
        return ModelError(
            f"model '{name}' ({role}){self._endpoint(name)} {why}: {cause}",
            model=name,
            attempts=attempts,
            fault=fault or _fault_of(exc),
        )

    def _endpoint(self, name: str) -> str:
        """Where the model is reached, for an error message: " at URL", or ""."""
        if name.startswith("local/"):
            return " (embedded)"
        api_base = self.settings(name).api_base
        if api_base:
            return f" at {api_base}"
        return f" at {name.split('/', 1)[0]}'s default endpoint"

    def _send(
        self,
        role: str,
        name: str,
        send: Callable[[], Any],
        item_id: str | None,
        *,
        prompt: str = "",
        hold: Hold | None = None,
    ) -> tuple[Any, int, int, float]:
        """One request in a governor slot, retried on transient failures.

        `hold` (the call's budget reservations) holds the first attempt's already; each retry
        reserves again, and a failed attempt keeps its reservation when the provider may have
        billed it (_may_be_billed), else releases it.

        Returns:
            (response, attempts, elapsed ns of the last attempt, seconds waited for the slot).

        Raises:
            ModelError: the last attempt failed; the failure is recorded in the role's ledger.
            BudgetExhausted: a retry would pass max_cost_usd; it was not sent, and the attempts
                before it are recorded at the cost they were kept at.
        """
        gov = self.governor(name)
        attempts = 0
        with gov.slot() as waited_s:
            while True:
                attempts += 1
                started = _clock_ns()
                try:
                    response = send()
                    return response, attempts, _clock_ns() - started, waited_s
                except Exception as exc:
                    elapsed_ns = _clock_ns() - started
                    if hold is not None:
                        hold.fail(exc, billed=_may_be_billed(exc), elapsed_ns=elapsed_ns)
                    transient = _transient(exc)
                    if not transient or attempts >= self.config.retry.max_attempts:
                        why = (
                            f"failed after {attempts} attempt(s)"
                            if transient
                            else "failed (not retried: the error is not transient)"
                        )
                        raise self._failed(
                            role,
                            name,
                            exc,
                            why,
                            attempts=attempts,
                            elapsed_ns=elapsed_ns,
                            item_id=item_id,
                            prompt=prompt,
                            **self._kept_figures(role, name, hold),
                        ) from exc
                    if hold is not None:
                        try:
                            hold.take()  # a retry is a new request: it reserves again
                        except BudgetExhausted:
                            self._record_kept(role, name, hold, item_id=item_id, prompt=prompt)
                            raise
                    _sleep(self.config.retry.delay(attempts - 1, _retry_after(exc), self._rng))

    # -- embeddings -----------------------------------------------------------------------
    def embed(self, texts: Sequence[str], *, model: str, role: str = "metric") -> Embeddings:
        """Embed `texts` with a litellm embedding model: governed, retried, budget-reserved and
        recorded in the role's ledger (the metric role: embeddings score outputs).

        Raises:
            ModelError: the call failed after retries, or failed in a way retries cannot fix.
            BudgetExhausted: the call's cost would pass max_cost_usd; it was not sent.
            ConfigError: under a money budget, the model has no known price.
        """
        texts = list(texts)
        settings = self.settings(model)
        price = self.price(model)
        item_id = getattr(active_meter(), "item_id", None)

        def reserve() -> Reservation | None:
            if not self.budget.limited:
                return None
            budget_price = self._budget_price(role, model)
            tokens = count_text_tokens(model, texts) if budget_price.input_per_mtok else 0
            return self.budget.reserve(
                worst_case_usd(budget_price, tokens, 0),
                role=role,
                model=model,
                detail=f"at most {tokens:,} input tokens in {len(texts)} text(s)",
            )

        if self.budget.limited:
            price = self._budget_price(role, model)
        hold = Hold(self.budget, reserve)
        hold.take()
        try:
            response, attempts, elapsed_ns, _ = self._send(
                role,
                model,
                lambda: self._embed_litellm(model, texts, settings),
                item_id,
                hold=hold,
            )
        except BaseException:
            hold.release()  # not sent (or interrupted): what _send did not settle is released
            raise
        if hold.kept_attempts:
            self._record_kept(role, model, hold, item_id=item_id, prompt="")
        in_tok, _ = _usage(response)
        cost = None if price is None else price.cost(in_tok, 0)
        hold.settle(cost if in_tok else None)
        self._record(
            CallRecord(
                role=role,
                model=model,
                elapsed_ms=elapsed_ns / 1e6,
                input_tokens=in_tok,
                cost_usd=cost,
                attempts=attempts,
                item_id=item_id,
            )
        )
        data = sorted(_field(response, "data") or [], key=lambda d: _field(d, "index") or 0)
        return Embeddings(
            vectors=[list(_field(d, "embedding")) for d in data],
            model=model,
            role=role,
            input_tokens=in_tok,
            cost_usd=cost,
            elapsed_ms=elapsed_ns / 1e6,
            attempts=attempts,
        )

    def _embed_litellm(self, model: str, texts: list[str], s: ModelSettings) -> Any:
        from skynet.models._litellm import litellm

        extra: dict[str, Any] = {}
        if s.api_base:
            extra["api_base"] = s.api_base
        if s.api_key:
            extra["api_key"] = s.api_key
        elif s.api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            extra["api_key"] = "sk-no-key"  # local OpenAI-compatible servers take no key
        return _within(
            s.timeout_s,
            model,
            lambda: litellm.embedding(
                model=model,
                input=texts,
                timeout=s.timeout_s,
                num_retries=0,
                max_retries=0,
                **extra,
            ),
        )

    def _call_litellm(
        self,
        model: str,
        messages: list[dict[str, Any]],
        params: dict[str, Any],
        s: ModelSettings,
        price: Price | None = None,
    ) -> Any:
        from skynet.models._litellm import litellm

        extra: dict[str, Any] = _litellm_pricing(price)
        if s.api_base:
            extra["api_base"] = s.api_base
        if s.api_key:
            extra["api_key"] = s.api_key
        elif s.api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # OpenAI-compatible local servers (vLLM, llama.cpp, Ollama) take no key, but the
            # OpenAI client refuses to send a request without one.
            extra["api_key"] = "sk-no-key"
        # Skynet retries; litellm and the OpenAI client must not retry underneath it.
        return _within(
            s.timeout_s,
            model,
            lambda: litellm.completion(
                model=model,
                messages=_sendable(messages),
                timeout=s.timeout_s,
                num_retries=0,
                max_retries=0,
                **extra,
                **params,
            ),
        )

    def _finish(
        self,
        role: str,
        model: str,
        call: CachedCall,
        *,
        cached: bool,
        lookup_ns: int = 0,
        attempts: int = 1,
        item_id: str | None = None,
        excluded_ns: int = 0,
        waits: tuple[tuple[int, int], ...] = (),
        setup_cpu_ns: int = 0,
        messages: list[dict[str, Any]] | None = None,
    ) -> Reply:
        cost_note = ""
        if call.cost_usd is None:
            cost_note = (
                f"no known price for {model}"
                if self.price(model) is None
                else f"{model} reported no token usage"
            )
        self._record(
            CallRecord(
                role=role,
                model=model,
                elapsed_ms=call.elapsed_ns / 1e6,
                input_tokens=call.input_tokens,
                output_tokens=call.output_tokens,
                cost_usd=call.cost_usd,
                cached=cached,
                attempts=attempts,
                item_id=item_id,
                prompt=_json(messages) if messages is not None else "",
                reply=_json(call.reply),
            )
        )
        meter = active_meter()
        if role == "task" and meter is not None:
            meter.add_call(
                CallFigures(
                    model=model,
                    elapsed_ns=call.elapsed_ns,
                    input_tokens=call.input_tokens,
                    output_tokens=call.output_tokens,
                    cost_usd=call.cost_usd,
                    cached=cached,
                    lookup_ns=lookup_ns,
                    excluded_ns=excluded_ns,
                    waits=waits,
                    setup_cpu_ns=setup_cpu_ns,
                    cost_note=cost_note if self.price(model) is not None else "",
                )
            )
        return Reply(
            text=call.reply.get("text", ""),
            model=model,
            role=role,
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            cost_usd=call.cost_usd,
            cost_note=cost_note,
            elapsed_ms=call.elapsed_ns / 1e6,
            cached=cached,
            finish_reason=call.reply.get("finish_reason") or "stop",
            attempts=attempts,
            tool_calls=tuple(call.reply.get("tool_calls") or ()),
        )

    def close(self) -> None:
        self.cache.close()


def _within(timeout_s: float, model: str, call: Callable[[], Any]) -> Any:
    """call(), bounded by timeout_s as a whole: httpx's timeout bounds each read only, so a
    server that sends a byte now and then would hold a call (and a run) for ever. The call runs
    on its own thread, left behind when late; an embedded model runs in this thread (its
    timeout is httpx's business nowhere, and an abandoned thread would keep its CPU busy).

    Raises:
        litellm.exceptions.Timeout: no complete reply within timeout_s (transient: retried).
    """
    if model.startswith("local/"):
        return call()
    done = threading.Event()
    outcome: list[Any] = []
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome.append((True, context.run(call)))
        except BaseException as exc:  # noqa: BLE001 — handed to the caller below
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="skynet-model-call", daemon=True).start()
    if not done.wait(timeout_s):
        from litellm import exceptions as errors

        raise errors.Timeout(
            message=f"no complete reply within timeout_s = {timeout_s:g} s",
            model=model,
            llm_provider=model.split("/", 1)[0],
        )
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def _prepare(model: str) -> None:
    """One-time set-up kept out of the measured time: litellm's warm-up, embedded weights."""
    from skynet.models._litellm import warm

    warm()
    if model.startswith("local/"):
        from skynet.models import local

        local.register()
        local.load(model.split("/", 1)[1])


def _litellm_pricing(price: Price | None) -> dict[str, Any]:
    """litellm's per-call custom pricing, from the price Skynet already knows.

    litellm prices every reply although Skynet prices calls itself (Price.cost). For a model
    missing from litellm's table that costs ~1 ms of CPU per call under the GIL (a search through
    its fallback generalizations, then a zero-cost diagnostic); handed the price, litellm skips the
    search. Measured on 2 cores: ~10 % less CPU per call (benchmarks/README.md). A zero price is
    not passed: litellm's zero-cost diagnostic then makes the call slower, not faster.
    """
    if price is None or (price.input_per_mtok == 0 and price.output_per_mtok == 0):
        return {}
    return {
        "input_cost_per_token": price.input_per_mtok / 1e6,
        "output_cost_per_token": price.output_per_mtok / 1e6,
    }


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json(value: Any) -> str:
    """A request or reply as the run store keeps it (shown by the viewer); never raises."""
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)


def _sendable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with any lone surrogate (odd text fed back from a reply or an output) as
    U+FFFD: a request body is UTF-8, which cannot hold one, and the call would fail."""
    if not any(
        isinstance(m.get("content"), str) and _SURROGATE.search(m["content"]) for m in messages
    ):
        return messages
    return [
        {**m, "content": _SURROGATE.sub("\ufffd", m["content"])}
        if isinstance(m.get("content"), str)
        else m
        for m in messages
    ]


def _caps_output(params: dict[str, Any]) -> int | None:
    """The call's output-token limit, if it names one."""
    for name in ("max_tokens", "max_completion_tokens"):
        value = params.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return math.ceil(value)
    return None


def _unpriced(roles: str, model: str, limit: float | None) -> ConfigError:
    return ConfigError(
        f"[budget] max_cost_usd = {limit:g} is set, but the {roles} model '{model}' has no known "
        "price, so its calls cannot be held to the budget; declare its price in skynet.toml:\n"
        f'[models.prices."{model}"]\ninput_per_mtok = 0.15   # USD per million input tokens\n'
        "output_per_mtok = 0.60  # USD per million output tokens\n"
        "(or remove max_cost_usd to run without a money budget)"
    )


def _field(entry: Any, key: str) -> Any:
    return entry.get(key) if isinstance(entry, dict) else getattr(entry, key, None)


def _usage(response: Any) -> tuple[int, int]:
    """(input, output) tokens a response reports, 0 where it says nothing readable."""
    usage = _field(response, "usage")
    try:
        return (
            int(_field(usage, "prompt_tokens") or 0) if usage is not None else 0,
            int(_field(usage, "completion_tokens") or 0) if usage is not None else 0,
        )
    except (TypeError, ValueError):
        return 0, 0


def _parse(response: Any) -> tuple[dict[str, Any], int, int]:
    choice = response.choices[0]
    message = choice.message
    text = getattr(message, "content", None) or ""
    usage = getattr(response, "usage", None)
    in_tok = int(getattr(usage, "prompt_tokens", 0) or 0)
    out_tok = int(getattr(usage, "completion_tokens", 0) or 0)
    reply: dict[str, Any] = {"text": text, "finish_reason": choice.finish_reason or "stop"}
    tool_calls = getattr(message, "tool_calls", None)
    if tool_calls:
        reply["tool_calls"] = [
            {"name": tc.function.name, "arguments": tc.function.arguments} for tc in tool_calls
        ]
    return reply, in_tok, out_tok


# -- the session in force -----------------------------------------------------------------
_session: contextvars.ContextVar[Models | None] = contextvars.ContextVar(
    "skynet_models", default=None
)
_global: Models | None = None
_global_lock = threading.Lock()

METRIC_MODEL_ENV = "SKYNET_METRIC_MODEL"


def configure(
    config: ModelsConfig | None = None, *, base_dir: Path | None = None, **fields: Any
) -> Models:
    """Set the process-wide model session (what llm() and the artifacts use) and return it.

    Either pass a ModelsConfig, or its fields as keywords (task=..., reflection=..., ...).
    """
    global _global
    if config is None:
        config = ModelsConfig(**fields)
    elif fields:
        raise TypeError("pass a ModelsConfig or keyword fields, not both")
    models = Models(config, base_dir=base_dir)
    with _global_lock:
        old, _global = _global, models
    if old is not None:
        old.close()
    return models


@contextlib.contextmanager
def using(models: Models) -> Iterator[Models]:
    """Use `models` in this context (thread / asyncio task) only."""
    token = _session.set(models)
    try:
        yield models
    finally:
        _session.reset(token)


def current(*, for_metric: bool = False) -> Models:
    """The model session in force: using() > configure() > SKYNET_METRIC_MODEL (metric only).

    Raises:
        ConfigError: nothing is configured (the message says how to configure).
    """
    global _global
    found = _session.get() or _global
    if found is not None:
        return found
    env_model = os.environ.get(METRIC_MODEL_ENV, "").strip()
    if for_metric and env_model:
        with _global_lock:
            if _global is None:
                _global = Models(ModelsConfig(metric=env_model))
            return _global
    raise ConfigError(
        "no model is configured: inside `skynet run` the models come from skynet.toml; in a "
        f"plain script set {METRIC_MODEL_ENV} (e.g. {METRIC_MODEL_ENV}=local/smollm2, the "
        "embedded model, no key needed) or call skynet.models.configure(metric=...)"
    )
