"""Ledgers: one per role (task, reflection, metric), every model call with its figures."""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["CallRecord", "Ledger", "LedgerTotals", "ROLES"]

ROLES = ("task", "reflection", "metric")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTotals:
    """Sums over a ledger. cost_usd adds the priced calls; unpriced_calls counts the others."""

    calls: int
    failed_calls: int
    cached_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced_calls: int
    elapsed_ms: float

    @property
    def cost_text(self) -> str:
        """The cost as a user reads it: "$0.0123", "$0.0123 + 2 unpriced", or "unpriced" when
        no call had a known price (an unknown cost is never shown as $0)."""
        priced = self.calls - self.failed_calls - self.unpriced_calls
        if self.unpriced_calls and priced <= 0:
            return "unpriced"
        text = f"${self.cost_usd:.4f}"
        return f"{text} + {self.unpriced_calls} unpriced" if self.unpriced_calls else text


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
            cost_usd=sum(c.cost_usd for c in ok if c.cost_usd is not None and not c.cached),
            unpriced_calls=sum(c.cost_usd is None for c in ok),
            elapsed_ms=sum(c.elapsed_ms for c in calls),
        )
