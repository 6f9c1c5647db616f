"""A run's detail as dspy.GEPA's own `detailed_results`, for the best program of a DSPy seed.

dspy.GEPA(track_stats=True).compile(...) returns a program whose `.detailed_results` is a
dspy.teleprompt.gepa.gepa.DspyGEPAResult, and DSPy's tutorials read it off that program
(`find_dominator_programs(p.detailed_results.per_val_instance_best_candidates,
p.detailed_results.val_aggregate_scores)`, `p.detailed_results.candidates[i]`). skynet.optimize
gives its best program the same attribute, built from the run's DetailedResults
(skynet.runs.detail), in the shapes dspy builds it from gepa's GEPAResult:

- a candidate is named by its index in `candidates` (a dspy Module: the seed program with that
  candidate's instructions), a val item by its position in the val set (an int, as gepa numbers
  the valset list dspy gives it), where DetailedResults names both by id;
- `parents[i]` is a list of indices, [None] for the seed;
- `best_outputs_valset` maps a val position to [(index, dspy.Prediction)], each output as
  recorded (a program of one output field recorded its bare value: see `_prediction`).

A candidate of the pool whose val score is None (its val evaluations incomplete, or none could
be counted) has no place in dspy's `val_aggregate_scores` (floats) and would break
find_dominator_programs, so it is left out and the indices renumbered: the Pareto sets are
those of the candidates kept, and a child of one left out names that one's parents instead.
`best_outputs_valset` is always given (dspy gives it with track_best_outputs=True only);
`highest_score_achieved_per_val_task` is dspy's own property over these; the multi-objective
fields stay None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import dspy
from dspy.teleprompt.gepa.gepa import DspyGEPAResult

from skynet.runs.detail import detailed_results
from skynet.runs.report import RunSummary, in_pool

__all__ = ["SkynetDspyResult", "as_dspy_result", "for_project"]


# dspy's @experimental is typed as returning a callable: the class it decorates, at run time.
_DspyGEPAResult: Any = DspyGEPAResult


@dataclasses.dataclass(frozen=True)
class SkynetDspyResult(_DspyGEPAResult):
    """dspy's DspyGEPAResult whose `best_idx` (and so `best_candidate`) is the run's best, the
    program skynet.optimize returned: dspy takes the highest val_aggregate_scores (the first on
    a tie), which is the same candidate unless the run chose its best otherwise ([engine]
    select = "holdout", or the engine named it).

    Attributes:
        chosen_idx: the run's best's index in `candidates`; None when it is not among them
            (then best_idx is dspy's).
    """

    chosen_idx: int | None = None

    @property
    def best_idx(self) -> int:
        if self.chosen_idx is not None:
            return self.chosen_idx
        return super().best_idx


def as_dspy_result(
    summary: RunSummary,
    artifact: Any,
    *,
    val_order: Sequence[str],
    seed: int | None = None,
    log_dir: str | None = None,
) -> SkynetDspyResult:
    """The run `summary` reports as dspy.GEPA's detailed_results (see the module docstring).

    Args:
        summary: the run's report (skynet.runs.report.summarize).
        artifact: the run's DspyArtifact: `with_candidate` makes each candidate's program.
        val_order: the val item ids in the order of the val set given to the run; an item of
            the val reference set not among them comes after, in id order.
        seed: the run's [engine] seed (dspy's `seed`).
        log_dir: the run's folder (dspy's `log_dir`), or None.

    Returns:
        A DspyGEPAResult (a SkynetDspyResult) with the pool's candidates that have a val score.
    """
    kept = [c for c in summary.candidates if in_pool(summary, c) and c.val_score is not None]
    detail = detailed_results(dataclasses.replace(summary, candidates=kept))
    index = {cid: i for i, cid in enumerate(detail.candidates)}
    known = set(summary.val_reference)
    ordered = [item for item in dict.fromkeys(val_order) if item in known]
    position = {item: i for i, item in enumerate([*ordered, *sorted(known - set(ordered))])}

    def by_position(by_item: dict[str, Any]) -> dict[int, Any]:
        return dict(sorted((position[item], v) for item, v in by_item.items() if item in position))

    content = {c.id: c.content for c in kept}
    lineage = {c.id: c.parents for c in summary.candidates}
    name = _last_output_field(artifact.program)
    return SkynetDspyResult(
        candidates=[artifact.with_candidate(content[cid]) for cid in detail.candidates],
        parents=[_parents(ps, index, lineage) for ps in detail.parents],
        # Every one is a float: the candidates without a val score were left out above.
        val_aggregate_scores=[float(s) for s in detail.val_aggregate_scores if s is not None],
        val_subscores=[by_position(scores) for scores in detail.val_subscores],
        per_val_instance_best_candidates=by_position(
            {
                item: {index[c] for c in best}
                for item, best in detail.per_val_instance_best_candidates.items()
            }
        ),
        discovery_eval_counts=[n or 0 for n in detail.discovery_eval_counts],
        best_outputs_valset=by_position(
            {
                item: [(index[c], _prediction(output, name)) for c, output in pairs]
                for item, pairs in detail.best_outputs_valset.items()
            }
        ),
        total_metric_calls=detail.total_metric_calls,
        num_full_val_evals=len(detail.candidates),
        log_dir=log_dir,
        seed=seed,
        chosen_idx=detail.best_idx,
    )


def for_project(project: Any, summary: RunSummary) -> SkynetDspyResult:
    """`as_dspy_result` for a run of `project` (skynet.project.Project): its val set's order, its
    [engine] seed and its run folder."""
    folder = project.store_dir / "runs" / summary.run.id
    return as_dspy_result(
        summary,
        project.artifact,
        val_order=[item.id for item in project.dataset.val],
        seed=project.config.engine.seed,
        log_dir=str(folder) if folder.is_dir() else None,
    )


def _parents(
    parents: list[str], index: dict[str, int], lineage: dict[str, list[str]]
) -> list[int | None]:
    """A candidate's parents as indices: one left out stands for its own parents, so the DAG the
    tutorial draws stays connected; [None] when none is among the candidates (the seed)."""
    found: dict[int | None, None] = {}
    todo, seen = list(parents), set()
    while todo:
        parent = todo.pop(0)
        if parent not in seen:
            seen.add(parent)
            if parent in index:
                found[index[parent]] = None
            else:
                todo += lineage.get(parent, [])
    return list(found) or [None]


def _last_output_field(program: Any) -> str:
    """The last output field of the program's last predictor: the name a bare recorded output
    had (a program of one output field records its value alone)."""
    fields = [f for _, p in program.named_predictors() for f in p.signature.output_fields]
    return fields[-1] if fields else "output"


def _prediction(output: Any, name: str) -> dspy.Prediction:
    """A recorded output as the dspy.Prediction the program returned: a dict of its fields, or
    a bare value under `name`."""
    if isinstance(output, dict) and all(isinstance(k, str) for k in output):
        return dspy.Prediction(**output)
    return dspy.Prediction(**{name: output})
