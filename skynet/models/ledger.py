"""Ledgers: one per role (task, reflection, metric), every model call with its figures."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

__all__ = [
    "CALL_TEXT_BYTES",
    "EVALUATION_TEXT_BYTES",
    "CallRecord",
    "Ledger",
    "LedgerTotals",
    "ROLES",
    "kept_text",
]

ROLES = ("task", "reflection", "metric")

# What is kept of a call's request and of its reply (each), and of all the calls of one
# evaluation together: a candidate may send what it likes, and every byte kept is kept in
# memory and in runs.db for the life of the run. Past these, the rest is kept as its size and
# sha256 only. 256 KiB holds any reflection prompt Skynet writes (its fields are cut to
# [engine] max_side_info_chars) and a 64k-token request in full.
CALL_TEXT_BYTES = 256 << 10
EVALUATION_TEXT_BYTES = 1 << 20


def kept_text(text: str, keep: int) -> str:
    """`text` with at most `keep` bytes of it kept (UTF-8), the rest said by its size and hash:
    "…[cut: 3,912,004 more bytes, sha256 9f86d0…]" (keep 0: the hash note only)."""
    if len(text) * 4 <= keep:  # a character is at most 4 bytes: nothing to cut
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= keep:
        return text
    head = data[: max(0, keep)].decode("utf-8", "ignore")  # a split character is dropped
    digest = hashlib.sha256(data).hexdigest()
    more = len(data) - len(head.encode("utf-8", "surrogatepass"))
    said = "more bytes" if head else "bytes"
    return f"{head}…[cut: {more:,} {said}, sha256 {digest}]"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One model call as recorded (a failed call has ok=False and the error)."""

    role: str
    model: str
    elapsed_ms: float
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    cached: bool = False
    attempts: int = 1
    ok: bool = True
    error: str = ""
    item_id: str | None = None
    prompt: str = ""  # the request's messages as JSON ("" for an embedding)
    reply: str = ""  # the reply as JSON ("" for a failed call)
    # False: a call made outside Skynet's models (a program's or metric's own dspy.LM), seen
    # but not measured: its tokens and cost are unknown.
    measured: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTotals:
    """Sums over a ledger. cost_usd adds the priced calls, failed ones included (a failed call
    that may have been billed is counted at its kept reservation: failed_cost_usd, an upper
    bound); unpriced_calls counts the calls with no known price, untokened_calls those of them
    whose reply reported no token usage (a price cannot make their cost known), unmeasured_calls
    those made outside Skynet's models (seen, not measured: CallRecord.measured)."""

    calls: int
    failed_calls: int
    cached_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced_calls: int
    elapsed_ms: float
    failed_cost_usd: float = 0.0
    untokened_calls: int = 0
    unmeasured_calls: int = 0

    @property
    def cost_text(self) -> str:
        """The cost as a user reads it: "$0.0123", "$0.0123 + 2 unpriced", or "unpriced" when
        no call had a known price (an unknown cost is never shown as $0); "(failed calls: at
        most $0.0040)" when failed calls are counted in it."""
        priced = self.calls - self.failed_calls - self.unpriced_calls
        if self.unpriced_calls and priced <= 0 and not self.failed_cost_usd:
            return "unpriced"
        text = f"${self.cost_usd:.4f}"
        if self.unpriced_calls:
            text += f" + {self.unpriced_calls} unpriced"
        if self.failed_cost_usd:
            text += f" (failed calls: at most ${self.failed_cost_usd:.4f})"
        return text


class Ledger:
    """The calls of one role, in order. Thread-safe."""

    def __init__(self, role: str) -> None:
        self.role = role
        self._lock = threading.Lock()
        self._calls: list[CallRecord] = []

    def add(self, record: CallRecord) -> None:
        with self._lock:
            self._calls.append(record)

    @property
    def calls(self) -> tuple[CallRecord, ...]:
        with self._lock:
            return tuple(self._calls)

    def totals(self) -> LedgerTotals:
        calls = self.calls
        ok = [c for c in calls if c.ok]
        return LedgerTotals(
            calls=len(calls),
            failed_calls=len(calls) - len(ok),
            cached_calls=sum(c.cached for c in ok),
            # A cached call is not sent or paid again: it adds no tokens and no spend.
            input_tokens=sum(c.input_tokens for c in ok if not c.cached),
            output_tokens=sum(c.output_tokens for c in ok if not c.cached),
            # A failed call counts too: one that may have been billed keeps its reservation.
            cost_usd=sum(c.cost_usd for c in calls if c.cost_usd is not None and not c.cached),
            unpriced_calls=sum(c.cost_usd is None for c in ok),
            elapsed_ms=sum(c.elapsed_ms for c in calls),
            failed_cost_usd=sum(c.cost_usd for c in calls if not c.ok and c.cost_usd is not None),
            untokened_calls=sum(_untokened(c) for c in ok),
            unmeasured_calls=sum(not c.measured for c in calls),
        )


def _untokened(call: CallRecord) -> bool:
    """A sent call whose reply reported no tokens: its cost is unknown, whatever the price."""
    return (
        call.cost_usd is None
        and call.measured
        and not call.cached
        and call.input_tokens == 0
        and call.output_tokens == 0
    )
