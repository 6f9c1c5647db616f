"""Budget reservations: a paid model call holds its worst-case cost before it is sent.

The worst case of a call is its input tokens times the input price, plus its max_tokens times the
output price. Its input tokens are taken at an upper bound no tokenizer can pass: one token per
UTF-8 byte of every message, plus a chat template's overhead per message and per request (the
larger of that and litellm's count). A provider's tokenizer may count more than litellm's (a
prompt of 100,000 spaces is 789 tokens to litellm and up to 100,000 to a provider), and the text
of a request is mostly what a candidate wrote: a reservation must hold whatever it contains.

A reservation that would take what is spent plus what calls in flight hold past max_cost_usd is
refused: the call is not sent and BudgetExhausted is raised. When the reply comes back, its
reservation becomes its real cost. A failed attempt that may have reached the provider (a
time-out, a reply cut off, a connection lost after sending, a 5xx) keeps its reservation as
spent, since hosted providers bill a request the client abandoned; one the provider refused
(a 4xx or 429 reply, which reports no usage) or that never left (connection refused) releases
it. Each retry reserves again (a Hold). Reservations are taken under one lock, so calls in
flight at once cannot jointly pass the limit.

Under a money budget, a priced call that names no max_tokens is sent with DEFAULT_MAX_TOKENS, so
that its worst case is a real bound and not a guess.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from skynet.errors import BudgetExhausted
from skynet.models.pricing import Price

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "Budget",
    "Hold",
    "Reservation",
    "count_input_tokens",
    "count_text_tokens",
    "input_token_bound",
    "refusals",
    "worst_input_tokens",
]

DEFAULT_MAX_TOKENS = 4096
# Per message, on top of its text: the role and the separators of the chat template.
_MESSAGE_OVERHEAD = 8
# Per request, on top of its messages: the template's opening of the reply and any preamble.
_REQUEST_OVERHEAD = 16


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one call in flight holds against the budget."""

    id: int
    usd: float
    role: str
    model: str


class Budget:
    """The money budget of one model session: spent, reserved, and the first refusal.

    Args:
        max_cost_usd: the limit in USD (None: no money budget; nothing is reserved).
        spent_usd: what was spent before this session (a resumed run's recorded spend).
    """

    def __init__(self, max_cost_usd: float | None = None, *, spent_usd: float = 0.0) -> None:
        self.max_cost_usd = max_cost_usd
        self._lock = threading.Lock()
        self._spent = float(spent_usd)
        self._held: dict[int, float] = {}
        self._ids = itertools.count(1)
        self._refusal: BudgetExhausted | None = None
        self._aside = 0.0  # held back for a later phase (the run's confirmation)

    @property
    def limited(self) -> bool:
        """True when there is a money budget to keep."""
        return self.max_cost_usd is not None

    @property
    def spent_usd(self) -> float:
        with self._lock:
            return self._spent

    @property
    def reserved_usd(self) -> float:
        """What the calls in flight hold."""
        with self._lock:
            return sum(self._held.values())

    @property
    def refusal(self) -> BudgetExhausted | None:
        """The first call this budget refused, or None: once set, the run should stop."""
        with self._lock:
            return self._refusal

    @property
    def aside_usd(self) -> float:
        """What is held back from the calls made now, for a later phase (set_aside)."""
        with self._lock:
            return self._aside

    def set_aside(self, usd: float) -> None:
        """Hold `usd` back from every call until release_aside(): the search cannot spend the
        confirmation's worst case."""
        with self._lock:
            self._aside = max(0.0, float(usd))

    def release_aside(self) -> None:
        """The later phase starts: what was set aside is its to spend."""
        with self._lock:
            self._aside = 0.0

    def add_spent(self, usd: float) -> None:
        """Count spend made outside this session (a resumed run's recorded calls)."""
        with self._lock:
            self._spent += max(0.0, usd)

    def reserve(self, usd: float, *, role: str, model: str, detail: str = "") -> Reservation:
        """Hold `usd` for one call, or refuse it.

        Args:
            usd: the call's worst-case cost.
            role, model: the call's role and model (for the message).
            detail: how the worst case was reached (tokens, max_tokens), for the message.

        Raises:
            BudgetExhausted: spent + reserved + usd would pass max_cost_usd; the call must not
                be sent.
        """
        usd = max(0.0, float(usd))
        with self._lock:
            if self.max_cost_usd is not None:
                reserved = sum(self._held.values())
                if self._spent + reserved + self._aside + usd > self.max_cost_usd:
                    how = f" ({detail})" if detail else ""
                    aside = (
                        f" and ${self._aside:.4f} set aside for the confirmation"
                        if self._aside
                        else ""
                    )
                    exc = BudgetExhausted(
                        f"budget max_cost_usd = ${self.max_cost_usd:g} reached: the {role} call "
                        f"to {model} could cost up to ${usd:.4f}{how}, with ${self._spent:.4f} "
                        f"spent and ${reserved:.4f} held by calls in flight{aside}; it was not "
                        "sent. Raise [budget] max_cost_usd (--max-cost-usd) to spend more",
                        limit="max_cost_usd",
                        role=role,
                        model=model,
                        max_cost_usd=self.max_cost_usd,
                        spent_usd=self._spent,
                        reserved_usd=reserved,
                        needed_usd=usd,
                    )
                    if self._refusal is None:
                        self._refusal = exc
                    _note(exc)
                    raise exc
            reservation = Reservation(id=next(self._ids), usd=usd, role=role, model=model)
            self._held[reservation.id] = usd
            return reservation

    def settle(self, reservation: Reservation, cost_usd: float | None) -> None:
        """The reply came back: the reservation becomes the call's real cost.

        An unknown cost (None) counts as the whole reservation: the call was paid for.
        """
        with self._lock:
            held = self._held.pop(reservation.id, None)
            if held is None:
                return  # settled or released already
            self._spent += held if cost_usd is None else max(0.0, cost_usd)

    def release(self, reservation: Reservation) -> None:
        """The call was not sent, or the provider refused it unbilled: it holds nothing more."""
        with self._lock:
            self._held.pop(reservation.id, None)


class Hold:
    """The reservations of one call's attempts: each attempt holds its own worst case.

    A retry reserves again (a refusal then ends the call cleanly, with BudgetExhausted). A failed
    attempt the provider may have billed keeps its reservation as spent, and `kept_usd` says how
    much: an upper bound of what those attempts cost, never 0.

    Args:
        budget: the budget to hold against.
        reserve: takes one attempt's reservation (None without a money budget); may raise
            BudgetExhausted.
    """

    def __init__(self, budget: Budget, reserve: Callable[[], Reservation | None]) -> None:
        self._budget = budget
        self._reserve = reserve
        self._current: Reservation | None = None
        self.kept_usd = 0.0
        self.kept_attempts = 0
        self.failed_ns = 0  # time the failed attempts took
        self.last_error: BaseException | None = None

    def take(self) -> None:
        """Hold the next attempt's worst case (a no-op while one is held).

        Raises:
            BudgetExhausted: the attempt would pass max_cost_usd; it must not be sent.
        """
        if self._current is None:
            self._current = self._reserve()

    def fail(self, exc: BaseException, *, billed: bool, elapsed_ns: int = 0) -> None:
        """The attempt failed with `exc` after `elapsed_ns`: keep its reservation as spent when
        the provider may have billed it (`billed`), else release it."""
        held, self._current = self._current, None
        self.last_error = exc
        self.failed_ns += max(0, elapsed_ns)
        if held is None:
            return
        if billed:
            self._budget.settle(held, None)  # an unknown cost counts as the whole reservation
            self.kept_usd += held.usd
            self.kept_attempts += 1
        else:
            self._budget.release(held)

    def settle(self, cost_usd: float | None) -> None:
        """The attempt's reply came back: its reservation becomes `cost_usd` (None: all of it)."""
        held, self._current = self._current, None
        if held is not None:
            self._budget.settle(held, cost_usd)

    def release(self) -> None:
        """The attempt was never sent (or nothing can tell): release what it holds."""
        held, self._current = self._current, None
        if held is not None:
            self._budget.release(held)

    @property
    def kept_note(self) -> str:
        """What the failed attempts were counted at, for the ledger ("" when nothing was kept)."""
        if not self.kept_attempts:
            return ""
        return (
            f"cost at most ${self.kept_usd:.4f}, the reservation of {self.kept_attempts} "
            "attempt(s) kept: a provider may bill a request that failed after it was sent"
        )


def worst_case_usd(price: Price, input_tokens: int, max_tokens: int) -> float:
    """The most a call can cost: every input token, and max_tokens of output."""
    return price.cost(input_tokens, max_tokens)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, default=str)


def _utf8_size(text: str) -> int:
    # A byte-level tokenizer makes at most one token per byte; lone surrogates count too.
    return len(text.encode("utf-8", "surrogatepass"))


def input_token_bound(messages: Sequence[dict[str, Any]], tools: Any = None) -> int:
    """The most input tokens any tokenizer can make of a chat request of text.

    A token covers at least one byte (byte-level BPE, SentencePiece with byte fallback), so a
    message's text is at most its UTF-8 size in tokens; a chat template adds a few special tokens
    per message and per request. Holds for text only: an image part is billed by its size in
    pixels, not by the bytes of its URL.
    """
    total = _REQUEST_OVERHEAD
    for message in messages:
        total += _MESSAGE_OVERHEAD
        for value in message.values():
            total += _utf8_size(_text_of(value))
    if tools:
        total += _utf8_size(_text_of(tools))
    return total


def worst_input_tokens(
    model: str, messages: Sequence[dict[str, Any]], tools: Any = None
) -> tuple[int, str]:
    """The input tokens a reservation holds: (count, how it was reached, for a message).

    The larger of litellm's count and input_token_bound(): the request's text is mostly what a
    candidate wrote, and a provider's tokenizer may count it at many times litellm's figure.
    """
    counted, by_litellm = count_input_tokens(model, messages, tools)
    bound = input_token_bound(messages, tools)
    if counted >= bound:
        how = "counted" if by_litellm else "at most"
        return counted, f"{how} {counted:,} input tokens"
    return bound, f"at most {bound:,} input tokens (its UTF-8 size; litellm counts {counted:,})"


def count_input_tokens(
    model: str, messages: Sequence[dict[str, Any]], tools: Any = None
) -> tuple[int, bool]:
    """The input tokens of a chat request: (count, counted by litellm).

    litellm's token counter (the model's tokenizer when litellm knows it, else tiktoken's
    cl100k); when it fails, or a message holds content it would count as nothing (neither text
    nor a list of parts), an upper bound: one token per UTF-8 byte of every message, plus a few
    per message.
    """
    if all(isinstance(m.get("content"), (str, list, type(None))) for m in messages):
        try:
            from skynet.models._litellm import litellm

            kwargs: dict[str, Any] = {"model": model, "messages": list(messages)}
            if tools:
                kwargs["tools"] = tools
            return int(litellm.token_counter(**kwargs)), True
        except Exception:  # noqa: BLE001 — any counting failure falls back to the upper bound
            pass
    return input_token_bound(messages, tools), False


def count_text_tokens(model: str, texts: Sequence[str]) -> int:
    """The input tokens of an embedding request, at most: per text the larger of litellm's
    count and its UTF-8 size (texts to embed are often a candidate's output; see
    input_token_bound)."""
    total = 0
    for text in texts:
        bound = _utf8_size(text) + 1
        try:
            from skynet.models._litellm import litellm

            total += max(bound, int(litellm.token_counter(model=model, text=text)))
        except Exception:  # noqa: BLE001 — any counting failure falls back to the upper bound
            total += bound
    return total


# -- refusals seen by one evaluation --------------------------------------------------------
_seen: contextvars.ContextVar[list[BudgetExhausted] | None] = contextvars.ContextVar(
    "skynet_budget_refusals", default=None
)


def _note(exc: BudgetExhausted) -> None:
    seen = _seen.get()
    if seen is not None:
        seen.append(exc)


@contextlib.contextmanager
def refusals() -> Iterator[list[BudgetExhausted]]:
    """Collect the calls refused in this context (threads started with a copy of it included).

    An evaluation uses it to tell a result that is not real: code that caught the refusal (a
    candidate, a metric) and went on still made an output without the call it needed.
    """
    seen: list[BudgetExhausted] = []
    token = _seen.set(seen)
    try:
        yield seen
    finally:
        _seen.reset(token)
