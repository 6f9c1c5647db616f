"""Auto's parallel proposals, held to the metric-call budget.

gepa checks `max_metric_calls` only when an iteration starts, so an iteration of N proposals may
spend up to N x 2 x minibatch + val past the budget (raw gepa's one proposal: 2 x minibatch +
val). When Auto chose N > 1, the gepa engines wrap gepa's IndependentSampling in `BudgetFitted`:
each iteration proposes only as many candidates as the calls left can pay for (each proposal
evaluates its parent and its child on a minibatch; with BestImprovement one of them goes on to
val), and never fewer than one, so the run ends as near the budget as gepa's own default does.
A sampling strategy the user sets in [engine.options] is gepa's, unwrapped.
"""

from __future__ import annotations

from typing import Any

from skynet.engine import EngineContext

__all__ = ["BudgetFitted", "fit_options", "fit_to_budget"]


class BudgetFitted:
    """gepa's IndependentSampling(n), with fewer proposals once the budget left cannot pay for n.

    Attributes:
        n: the most proposals per iteration (what Auto chose).
    """

    def __init__(self, n: int, *, max_metric_calls: int, minibatch: int, val: int) -> None:
        self.n = n
        self.max_metric_calls = max_metric_calls
        self.minibatch = max(1, minibatch)
        self.val = val

    def proposals(self, spent: int) -> int:
        """How many proposals the calls left after `spent` pay for (at least one)."""
        left = self.max_metric_calls - spent - self.val
        return max(1, min(self.n, left // (2 * self.minibatch)))

    def sample_tasks(
        self, state: Any, candidate_selector: Any, batch_sampler: Any, trainset: Any
    ) -> list[Any]:
        from gepa.strategies.proposal_sampling import IndependentSampling

        n = self.proposals(int(state.total_num_evals))
        return IndependentSampling(n).sample_tasks(
            state, candidate_selector, batch_sampler, trainset
        )


def fit_options(options: dict[str, Any], ctx: EngineContext) -> dict[str, Any]:
    """gepa's options with their sampling strategy held to the budget, when Auto chose it."""
    if not ctx.fit_to_budget or "sampling_strategy" not in options:
        return options
    strategy = fit_to_budget(
        options["sampling_strategy"],
        max_metric_calls=ctx.max_metric_calls,
        minibatch=min(ctx.minibatch_size, len(ctx.train)),
        val=len(ctx.val),
    )
    return {**options, "sampling_strategy": strategy}


def fit_to_budget(strategy: Any, *, max_metric_calls: int | None, minibatch: int, val: int) -> Any:
    """`strategy` held to the budget when it is gepa's IndependentSampling with n > 1."""
    from gepa.strategies.proposal_sampling import IndependentSampling

    if max_metric_calls is None or type(strategy) is not IndependentSampling or strategy.n <= 1:
        return strategy
    return BudgetFitted(strategy.n, max_metric_calls=max_metric_calls, minibatch=minibatch, val=val)
