"""Stop conditions the gepa engines share (gepa's stop_callbacks protocol: called with gepa's
state, True stops the search)."""

from __future__ import annotations

from typing import Any

from skynet.engine import EngineContext

__all__ = ["PerfectOnVal"]


class PerfectOnVal:
    """Stops once a candidate scored the metric's top score on every val item: nothing is left
    to gain on val, and more proposals would only spend reflection and metric calls. The top
    score is [engine.options] perfect_score; unset, 1.0 (gepa.optimize's default) as long as
    no val score above 1.0 was seen (a metric on another scale never stops here)."""

    def __init__(self, ctx: EngineContext, perfect: float | None) -> None:
        self.ctx = ctx
        self.perfect = perfect
        self.said = ""

    def __call__(self, gepa_state: Any) -> bool:
        every = list(getattr(gepa_state, "prog_candidate_val_subscores", []) or [])
        top = self.perfect
        if top is None:
            if any(score > 1.0 for scores in every for score in scores.values()):
                return False
            top = 1.0
        val = len(self.ctx.val)
        if any(len(s) == val and all(x >= top for x in s.values()) for s in every):
            self.said = f"the best is perfect on val: score {top:g} on each of the {val} items"
            return True
        return False
