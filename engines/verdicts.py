"""gepa's verdict on each proposal, recorded: accepted into the pool, or rejected on its
minibatch, with the candidate it was made from.

gepa fires `on_proposal_start` (the parent), `on_proposal_end` (the new component texts), then
`on_candidate_accepted` or `on_candidate_rejected` for each proposal of an iteration. The
rejected event names no candidate: the proposal it speaks of is the iteration's oldest one not
yet judged (gepa judges an iteration's proposals in the order they were made). A rejected
candidate keeps its parent in the lineage, so the viewer's tree shows where every proposal came
from, not only the accepted ones.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from skynet.engine import Candidate, EngineContext

__all__ = ["Verdicts"]


class Verdicts:
    """gepa callbacks (both engines) that record each proposal's verdict and its parent."""

    def __init__(self, ctx: EngineContext, rename: Callable[[str], str] = str) -> None:
        self.ctx = ctx
        self.rename = rename  # gepa's component name -> the artifact's
        self.lock = threading.Lock()
        self.pool: dict[int, Candidate] = {}
        self._parents: dict[int, list[Candidate]] = {}  # iteration -> parents, in order
        self._pending: dict[int, list[tuple[Candidate, Candidate]]] = {}  # (parent, child)

    def _named(self, candidate: dict[str, str]) -> Candidate:
        return {self.rename(k): v for k, v in candidate.items()}

    def on_valset_evaluated(self, event: Any) -> None:
        candidate = self._named(event["candidate"])
        with self.lock:
            self.pool[int(event["candidate_idx"])] = candidate
            parents = [
                self.pool[p] for p in event["parent_ids"] if p is not None and p in self.pool
            ]
        self.ctx.record_lineage(candidate, parents)

    def on_proposal_start(self, event: Any) -> None:
        with self.lock:
            parent = self._named(event["parent_candidate"])
            self._parents.setdefault(int(event["iteration"]), []).append(parent)

    def on_proposal_end(self, event: Any) -> None:
        iteration = int(event["iteration"])
        with self.lock:
            waiting = self._parents.get(iteration) or []
            parent = waiting.pop(0) if waiting else None
            if parent is not None:
                child = {**parent, **self._named(event["new_instructions"])}
                self._pending.setdefault(iteration, []).append((parent, child))
        self.proposal_made(event, parent or {})

    def proposal_made(self, event: Any, parent: Candidate) -> None:
        """What the engine records of a proposal as it is made (dspy-gepa: its texts)."""

    def _judged(self, iteration: int, child: Candidate | None) -> tuple[Candidate, Candidate]:
        with self.lock:
            pending = self._pending.get(iteration) or []
            found = next((p for p in pending if child is not None and p[1] == child), None)
            if found is None and pending:
                found = pending[0]
            if found is not None:
                pending.remove(found)
        return found if found is not None else ({}, child or {})

    def on_candidate_accepted(self, event: Any) -> None:
        iteration = int(event["iteration"])
        with self.lock:
            child = self.pool.get(int(event["new_candidate_idx"]))
        parent, _ = self._judged(iteration, child)
        self.ctx.record_proposal(
            status="accepted",
            detail=f"iteration {iteration}: better on its minibatch (sum of scores "
            f"{event['new_score']:g}); into the pool",
            parent=parent or None,
        )

    def on_candidate_rejected(self, event: Any) -> None:
        iteration = int(event["iteration"])
        parent, child = self._judged(iteration, None)
        if parent and child and child != parent:
            self.ctx.record_lineage(child, [parent])
        self.ctx.record_proposal(
            status="rejected",
            detail=f"iteration {iteration}: {event['reason']}",
            parent=parent or None,
        )
