"""GEPA's budget arithmetic, shared by Auto (which sizes a budget from a number of proposals) and
the gepa engines (which tell the dry run how many proposals a budget pays for, through
Engine.proposals_for): the seed on the val split, then per proposal its parent and child on a
minibatch, and the accepted children on the whole val split, taken as one proposal in
ACCEPTED_ONE_IN."""

from __future__ import annotations

__all__ = ["ACCEPTED_ONE_IN", "gepa_metric_calls", "gepa_proposals"]

ACCEPTED_ONE_IN = 3


def gepa_metric_calls(proposals: int, *, val: int, minibatch: int) -> int:
    """The metric calls a GEPA run of `proposals` proposals spends (val and minibatch in items)."""
    return val + proposals * 2 * minibatch + (proposals * val) // ACCEPTED_ONE_IN


def gepa_proposals(metric_calls: int, *, val: int, minibatch: int) -> int:
    """How many proposals `metric_calls` pays for: the inverse of gepa_metric_calls, and at
    least one once the seed's val evaluation is paid for (GEPA then proposes once)."""
    if metric_calls <= val:
        return 0
    n = int((metric_calls - val) / (2 * minibatch + val / ACCEPTED_ONE_IN))
    while gepa_metric_calls(n + 1, val=val, minibatch=minibatch) <= metric_calls:
        n += 1  # the integer division in gepa_metric_calls can leave room for one more
    return max(1, n)
