"""The Auto engine's rules: which engine, what budget, which frontier, when to stop early.

Each choice comes with its reason; the run prints them and stores them in the run record.

- Engine: a DSPy program → dspy-gepa; a prompt or code → gepa-async (engines/async_gepa.py:
  gepa's search with no step waiting on a val evaluation; benchmarks/speed.py), or gepa's own
  loop (engine gepa) when [engine.options] sets a gepa option gepa-async does not take
  (ASYNC_OPTIONS lists those it does).
- Budget (only when neither max_metric_calls nor max_full_evals is set in skynet.toml or on the
  command line): the seed on the val split, then N proposals, each a minibatch for parent and
  child, with a third of them accepted and scored on the whole val split: val + N x 2 x
  minibatch + N / 3 x val, where N is 6 (light), 15 (medium) or 40 (heavy). The formula is
  engines.budget.gepa_metric_calls; the dry run inverts it (gepa_proposals) to say how many
  proposals a budget pays for.
- Frontier: "hybrid" (per val item and per named score) when the metric returns named scores,
  else "instance" (per val item).
- Early stop: when the best val score has not improved for 3 (light), 5 (medium) or 8 (heavy)
  proposals.
- Parallel proposals (gepa's loop and dspy-gepa): gepa's loop evaluates one minibatch between sequential reflection calls,
  which leaves most evaluation slots idle. Auto proposes N candidates per iteration from N
  parents (gepa's IndependentSampling, "independent:N"), N = slots // minibatch to fill the
  slots, at most train // minibatch (so each proposal reads its own train items), at least 1.
  The slots are the concurrency, or fewer when the task model takes fewer calls at once (its
  max_concurrent; the embedded model takes one). [engine.options] sampling_strategy (for
  dspy-gepa: gepa_kwargs.sampling_strategy) wins.
- With N > 1 proposals per iteration: selection "best" (gepa's BestImprovement), so only the
  iteration's best proposal is scored on val; gepa's default, "all", scores every proposal that
  beat its parent on its minibatch, and N val evaluations per iteration spend the budget on few,
  shallow iterations (benchmarks/speed.py: best val 0.750 with "all", 1.000 with "best", raw
  gepa 1.000). [engine.options] selection_strategy wins. And the proposals per iteration shrink
  as the budget runs out (engines.sampling), so the run ends within one proposal of
  max_metric_calls, as gepa's own one-proposal loop does.
"""

from __future__ import annotations

from dataclasses import dataclass

from engines.budget import ACCEPTED_ONE_IN, gepa_metric_calls
from skynet.engine import Planned, PlanRequest

__all__ = ["ASYNC_OPTIONS", "AutoPlan", "plan", "planner", "PROPOSALS", "PATIENCE"]

PROPOSALS = {"light": 6, "medium": 15, "heavy": 40}
# gepa's options gepa-async takes as gepa's loop does: with any other set (a sampling or
# selection strategy, merge, a Python proposer...), Auto keeps gepa's own loop.
ASYNC_OPTIONS = frozenset({"frontier_type", "perfect_score", "skip_perfect_score"})
PATIENCE = {"light": 3, "medium": 5, "heavy": 8}


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoPlan:
    engine: str
    max_metric_calls: int | None  # None: keep the budget the user set
    frontier: str
    patience: int
    sampling: str | None  # gepa's sampling_strategy in its string form; None: the user's
    selection: str | None = None  # gepa's selection_strategy; None: the user's or gepa's default
    fit_to_budget: bool = False  # Auto's sampling shrinks as the metric-call budget runs out
    reasons: tuple[str, ...]


def plan(
    *,
    kind: str,
    level: str,
    train: int,
    val: int,
    minibatch_size: int,
    named_scores: bool,
    budget_set_by_user: int | None,
    concurrency: int = 1,
    task_slots: tuple[int, str] | None = None,
    options_set: frozenset[str] = frozenset(),
) -> AutoPlan:
    """The Auto engine's choices for a run, each with its reason."""
    engine = "dspy-gepa" if kind == "dspy" else "gepa-async"
    own = sorted(options_set - ASYNC_OPTIONS)
    if engine == "gepa-async" and own:
        engine = "gepa"
        reasons = [
            f"engine gepa for a {kind} artifact (gepa's own loop: [engine.options] {own[0]} is set)"
        ]
    elif engine == "gepa-async":
        reasons = [
            f"engine gepa-async for a {kind} artifact (gepa's search, its next proposal "
            "written while the last one is scored on val)"
        ]
    else:
        reasons = [f"engine {engine} for a {kind} artifact"]
    proposals = PROPOSALS[level]
    minibatch = min(minibatch_size, train)
    if budget_set_by_user is None:
        budget: int | None = gepa_metric_calls(proposals, val=val, minibatch=minibatch)
        reasons.append(
            f"budget {budget} metric calls: {level} = {proposals} proposals "
            f"({val} val + {proposals} x 2 x {minibatch} minibatch + one in {ACCEPTED_ONE_IN} "
            f"accepted x {val} val)"
        )
    else:
        budget = None
        reasons.append(f"budget {budget_set_by_user} metric calls: set in the config")
    frontier = "hybrid" if named_scores else "instance"
    reasons.append(
        "frontier hybrid: the metric returns named scores"
        if named_scores
        else "frontier instance: the metric returns no named scores"
    )
    patience = PATIENCE[level]
    reasons.append(f"early stop after {patience} proposals without a better val score ({level})")
    sampling: str | None = None
    selection: str | None = None
    if "sampling_strategy" in options_set:
        reasons.append("proposals per iteration: sampling_strategy set in [engine.options]")
    elif engine == "gepa-async":
        reasons.append(
            "one proposal at a time, as gepa makes them; its child is also scored on the next "
            "proposal's minibatch, and its val evaluation runs while the next reflection is "
            "written"
        )
    else:
        slots, slots_why = concurrency, f"concurrency {concurrency}"
        if task_slots is not None and task_slots[0] < concurrency:
            slots = task_slots[0]
            slots_why = (
                f"{task_slots[1]} takes {slots} call(s) at once (below concurrency {concurrency})"
            )
        fill = max(1, slots // minibatch)
        cap = max(1, train // minibatch)
        n = min(fill, cap)
        sampling = f"independent:{n}" if n > 1 else None  # None: gepa's default, single
        why = f"{slots_why} // minibatch {minibatch} = {fill}"
        if cap < fill:
            why += f", held to train {train} // minibatch {minibatch} = {cap}"
        reasons.append(
            f"{n} proposals per iteration from {n} parents (sampling {sampling}: {why})"
            if n > 1
            else f"one proposal per iteration (gepa's default: {why})"
        )
        if n > 1:
            reasons.append(f"fewer proposals per iteration once the budget left cannot pay for {n}")
            if "selection_strategy" in options_set:
                reasons.append("selection: selection_strategy set in [engine.options]")
            else:
                selection = "best"
                reasons.append(
                    f"selection best: only the best of the {n} proposals is scored on val"
                )
    return AutoPlan(
        engine=engine,
        max_metric_calls=budget,
        frontier=frontier,
        patience=patience,
        sampling=sampling,
        selection=selection,
        fit_to_budget=sampling is not None,
        reasons=tuple(reasons),
    )


def planner(request: PlanRequest) -> Planned:
    """Auto as a registered planner (skynet.registry, kind "planner"): its choices among gepa's
    options (frontier, sampling, selection) arrive as the engine's options, where the user set
    none."""
    chosen = plan(
        kind=request.kind,
        level=request.level,
        train=request.train,
        val=request.val,
        minibatch_size=request.minibatch_size,
        named_scores=request.named_scores,
        budget_set_by_user=request.budget_set_by_user,
        concurrency=request.concurrency,
        task_slots=request.task_slots,
        options_set=request.options_set,
    )
    options = {
        name: value
        for name, value in (
            ("frontier_type", chosen.frontier),
            ("sampling_strategy", chosen.sampling),
            ("selection_strategy", chosen.selection),
        )
        if value is not None and name not in request.options_set
    }
    return Planned(
        engine=chosen.engine,
        reasons=chosen.reasons,
        max_metric_calls=chosen.max_metric_calls,
        options=options,
        patience=chosen.patience,
        fit_to_budget=chosen.fit_to_budget,
    )
