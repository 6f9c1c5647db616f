"""Warm start: a code candidate that asks for `opt_state` gets the best so far on its item.

gepa's optimize_anything hands an evaluator that declares an `opt_state` parameter an
OptimizationState whose `best_example_evals` are the best evaluations of the current example so
far, so that (in its circle-packing tutorial) a new attempt starts from the best packing found.
Skynet does the same for a code candidate: `run(input, opt_state)` is called with

    {"best_example_evals": [{"score": 0.93, "output": ...}, ...]}   # best first, at most K

where each entry is an earlier candidate's recorded evaluation of this item in this run: its
score and its output, plain JSON (a copy inside the sandbox; nothing live crosses it).

Where it comes from: the run's records. The run (skynet.session) notes every evaluation it
records or replays and keeps, per item, the best K (scored under the run's metric, the output
as recorded and at most MAX_OUTPUT_BYTES as JSON; ties: the earlier). A resumed engine replays
its recorded evaluations from runs.db in the order it first made them, so a candidate evaluated
after a resume gets what it would have got in a run never stopped (a retried evaluation too:
not what was recorded after it). The run hands the state with the item to the executor
(skynet.evaluation.WarmItem, pickled with the item to a worker), and Evaluation makes it best_so_far() while the
candidate runs. Two candidates evaluated at once on one item (parallel proposals) see each
other's in the order they are recorded, as in gepa.

What is never in it: the item's expected answer, the metric's feedback, named scores or extra
fields, errors, and anything of a test item (a test confirmation and `skynet eval` measure a
candidate on its own: its state there is empty).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# Standard library only at run time: the code artifact reads best_so_far() here, and the
# sandbox's modules load on their own (tests/unprivileged.py runs them as another user).
if TYPE_CHECKING:
    from skynet.data import Item

__all__ = ["K", "MAX_OUTPUT_BYTES", "BestSoFar", "best_so_far", "warming"]

K = 30  # entries per item: gepa's default best_example_evals_k ([artifact] best_example_evals_k)
# An output longer than this (as JSON) is left out: a warm start is a seed, not a store, and an
# output runs.db cut (past 256 KiB) is not the output.
MAX_OUTPUT_BYTES = 64 << 10

_BEST: contextvars.ContextVar[tuple[dict[str, Any], ...]] = contextvars.ContextVar(
    "skynet_best_so_far", default=()
)


def best_so_far() -> tuple[dict[str, Any], ...]:
    """The warm start of the item being evaluated, best first: `{"score", "output"}` each.

    Empty outside a run's search and before any candidate was scored on the item. A task runner
    that can use it reads it here (the code artifact writes it into the sandbox).
    """
    return _BEST.get()


@contextlib.contextmanager
def warming(best: tuple[dict[str, Any], ...]) -> Iterator[None]:
    """best_so_far() is `best` inside the block (Evaluation: a WarmItem's)."""
    token = _BEST.set(best)
    try:
        yield
    finally:
        _BEST.reset(token)


@dataclass(frozen=True, slots=True)
class _Entry:
    score: float
    order: int
    candidate_id: str
    output_json: str


def _same(item: Item) -> str:
    """Items alike in input and expected share a warm start (gepa keys it by the example): a
    train item and its val copy (skynet.data.val_copies) are one example."""
    return json.dumps([item.input, item.expected], sort_keys=True, default=str)


class BestSoFar:
    """Per item, the best K evaluations recorded so far in one run (thread-safe).

    Args:
        items: the run's items; those alike in input and expected share one warm start (an
            item not among them has its own, by its id).
        k: how many evaluations an item's warm start keeps.
    """

    def __init__(self, items: Iterable[Item] = (), k: int = K) -> None:
        self.k = k
        self._key = {item.id: _same(item) for item in items}
        self._best: dict[str, list[_Entry]] = {}
        self._order = 0
        self._lock = threading.Lock()

    def note(self, item_id: str, candidate_id: str, score: float | None, output: Any) -> None:
        """One evaluation recorded (or replayed): kept if it is among the item's best K. An
        error (no score), a non-finite score, an output that is not JSON or is longer than
        MAX_OUTPUT_BYTES is not kept; a candidate's evaluation counts once."""
        if (
            isinstance(score, bool)
            or not isinstance(score, int | float)
            or not math.isfinite(score)
        ):
            return
        try:
            text = json.dumps(output, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return
        if len(text) > MAX_OUTPUT_BYTES:
            return
        with self._lock:
            kept = self._best.setdefault(self._key.get(item_id, item_id), [])
            if any(e.candidate_id == candidate_id for e in kept):
                return
            self._order += 1
            kept.append(_Entry(float(score), self._order, candidate_id, text))
            kept.sort(key=lambda e: (-e.score, e.order))
            del kept[self.k :]

    def warm(self, item: Item) -> Item:
        """`item` with its warm start (a skynet.evaluation.WarmItem), or itself when nothing is
        kept for it."""
        from skynet.evaluation import WarmItem

        with self._lock:
            kept = list(self._best.get(self._key.get(item.id, item.id), ()))
        if not kept:
            return item
        best = tuple({"score": e.score, "output": json.loads(e.output_json)} for e in kept)
        return WarmItem(item.id, item.input, item.expected, best=best)
