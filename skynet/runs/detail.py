"""A run's per-item detail, shaped as dspy.GEPA's `detailed_results` (`track_stats=True`).

`detailed_results(summary)` builds it from a run's report (skynet.runs.report.summarize), so it
counts what the report counts: the candidates are the pool (the seed and those scored on every
val item, `report.in_pool`), in first-seen order; a score is one recorded under the report's
metric hash on an item of the val reference set; a candidate's own failure counts as 0 and a
metric or model fault is left out (skynet.mean.counted_score), as in the report's means.

Where gepa's GEPAResult and dspy's DspyGEPAResult name a candidate by its index in
`candidates`, this names it by its id (candidates[i] is that id); `best_idx` is the index.

| DetailedResults                     | gepa GEPAResult / dspy DspyGEPAResult                     |
|-------------------------------------|-----------------------------------------------------------|
| candidates (ids)                    | candidates (component dicts / dspy Modules)               |
| parents (ids; [] for the seed)      | parents (indices; [None] for the seed)                    |
| val_aggregate_scores                | val_aggregate_scores (None here: not fully scored)        |
| val_subscores                       | val_subscores ({val id: score} per candidate)             |
| per_val_instance_best_candidates    | per_val_instance_best_candidates (the Pareto sets)        |
| highest_score_achieved_per_val_task | highest_score_achieved_per_val_task (dspy)                |
| best_outputs_valset                 | best_outputs_valset ({val id: [(candidate, output)]})     |
| discovery_eval_counts               | discovery_eval_counts                                     |
| total_metric_calls                  | total_metric_calls                                        |
| best_candidate (an id), best_idx    | best_candidate (components / Module), best_idx            |
| val_left_out                        | (none: gepa has no fault that is left out of a mean)      |
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

from skynet.mean import counted_score
from skynet.runs.report import TEST, VAL, RunSummary, in_pool

__all__ = ["DetailedResults", "detailed_json", "detailed_results"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DetailedResults:
    """A run's candidates and their val scores item by item, with the Pareto sets.

    Attributes:
        candidates: the pool's candidate ids (the seed and those scored on every val item), in
            first-seen order; every list below is in this order.
        parents: each candidate's parent ids ([] for the seed).
        val_aggregate_scores: each candidate's val score as the report shows it: the mean over
            the val items, its own failures as 0, metric and model faults left out; None when
            its val evaluations are incomplete or none could be counted.
        val_subscores: each candidate's {val item id: score} on the val items it has a counted
            score on (a failure of its own as 0.0; an item left out has no entry).
        val_left_out: each candidate's {val item id: error kind} for its evaluations left out of
            its mean (a metric, contract or model fault): why an item is missing above.
        per_val_instance_best_candidates: {val item id: ids of the candidates with the highest
            score on it}, among the candidates with a counted score there: the Pareto sets. An
            item no candidate has a counted score on has no entry.
        highest_score_achieved_per_val_task: {val item id: that highest score}.
        best_outputs_valset: {val item id: [(candidate id, output)]} for the candidates of its
            Pareto set, each output as recorded (its repr when it was not JSON-able).
        discovery_eval_counts: each candidate's search metric calls recorded before its first
            val evaluation (the seed's is 0 when it was evaluated first), as the run store
            ordered its evaluations; None for a candidate with no val evaluation.
        total_metric_calls: the search's metric calls used (the report's figure).
        best_candidate: the run's best candidate (the report's), or None (an evaluation-only
            run, or no candidate yet).
    """

    candidates: list[str]
    parents: list[list[str]]
    val_aggregate_scores: list[float | None]
    val_subscores: list[dict[str, float]]
    val_left_out: list[dict[str, str]]
    per_val_instance_best_candidates: dict[str, set[str]]
    highest_score_achieved_per_val_task: dict[str, float]
    best_outputs_valset: dict[str, list[tuple[str, Any]]]
    discovery_eval_counts: list[int | None]
    total_metric_calls: int
    best_candidate: str | None

    @property
    def best_idx(self) -> int | None:
        """The best candidate's index in `candidates`; None when it is not in the pool."""
        if self.best_candidate is None or self.best_candidate not in self.candidates:
            return None
        return self.candidates.index(self.best_candidate)

    @property
    def num_candidates(self) -> int:
        """How many candidates the pool holds."""
        return len(self.candidates)

    @property
    def num_val_instances(self) -> int:
        """How many val items have a Pareto set."""
        return len(self.per_val_instance_best_candidates)


def detailed_results(summary: RunSummary) -> DetailedResults:
    """The per-item detail of the run `summary` reports (see the module docstring).

    Args:
        summary: the run's report, from skynet.runs.report.summarize.

    Returns:
        Its pool, each candidate's val score item by item, and the Pareto sets.
    """
    pool = [c for c in summary.candidates if in_pool(summary, c)]
    ids = [c.id for c in pool]
    subscores: dict[str, dict[str, float]] = {cid: {} for cid in ids}
    left_out: dict[str, dict[str, str]] = {cid: {} for cid in ids}
    outputs: dict[tuple[str, str], Any] = {}
    first_val: dict[str, int] = {}
    for e in summary.evaluations:
        if e.split != VAL or e.candidate_id not in subscores:
            continue
        first_val.setdefault(e.candidate_id, e.seq)
        if e.item_id not in summary.val_reference:
            continue
        score = counted_score((e.score, e.error_kind, e.error is None))
        if score is None:
            left_out[e.candidate_id][e.item_id] = e.error_kind or "unknown"
        else:
            subscores[e.candidate_id][e.item_id] = score
            outputs[e.candidate_id, e.item_id] = e.output

    highest, best_on = _fronts(subscores, sorted(summary.val_reference))
    searched = sorted(e.seq for e in summary.evaluations if e.split != TEST)
    return DetailedResults(
        candidates=ids,
        parents=[list(c.parents) for c in pool],
        val_aggregate_scores=[c.val_score for c in pool],
        val_subscores=[_sorted(subscores[cid]) for cid in ids],
        val_left_out=[_sorted(left_out[cid]) for cid in ids],
        per_val_instance_best_candidates=best_on,
        highest_score_achieved_per_val_task=highest,
        best_outputs_valset={
            item: [(cid, outputs[cid, item]) for cid in ids if cid in best]
            for item, best in best_on.items()
        },
        discovery_eval_counts=[
            bisect_left(searched, first_val[cid]) if cid in first_val else None for cid in ids
        ],
        total_metric_calls=summary.metric_calls,
        best_candidate=summary.best.id if summary.best is not None else None,
    )


def _fronts(
    subscores: dict[str, dict[str, float]], items: list[str]
) -> tuple[dict[str, float], dict[str, set[str]]]:
    """Each item's highest score and the candidates that have it (its Pareto set), among the
    candidates with a counted score on it; an item none has one on is left out of both."""
    highest: dict[str, float] = {}
    best_on: dict[str, set[str]] = {}
    for item in items:
        scored = {cid: row[item] for cid, row in subscores.items() if item in row}
        if scored:
            highest[item] = max(scored.values())
            best_on[item] = {cid for cid, score in scored.items() if score == highest[item]}
    return highest, best_on


def _sorted(scores: dict[str, Any]) -> dict[str, Any]:
    """`scores` keyed in item-id order, whatever order the evaluations were recorded in."""
    return {item: scores[item] for item in sorted(scores)}


def detailed_json(detail: DetailedResults) -> dict[str, Any]:
    """`detail` as the "detailed" key of `skynet show RUN --json` (docs/runs.md): every field
    but the outputs, each Pareto set as a list in pool order."""
    return {
        "candidates": list(detail.candidates),
        "parents": [list(p) for p in detail.parents],
        "val_aggregate_scores": list(detail.val_aggregate_scores),
        "val_subscores": [dict(s) for s in detail.val_subscores],
        "val_left_out": [dict(s) for s in detail.val_left_out],
        "per_val_instance_best_candidates": {
            item: [cid for cid in detail.candidates if cid in best]
            for item, best in detail.per_val_instance_best_candidates.items()
        },
        "highest_score_achieved_per_val_task": dict(detail.highest_score_achieved_per_val_task),
        "discovery_eval_counts": list(detail.discovery_eval_counts),
        "total_metric_calls": detail.total_metric_calls,
        "best_candidate": detail.best_candidate,
        "best_idx": detail.best_idx,
    }
