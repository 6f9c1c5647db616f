"""The engine plan: which engine a run uses, with what budget and settings, and why.

A project names its engine, or a planner ("auto": Auto's rules in engines/auto.py, registered
as a planner and loaded by name, never imported eagerly) that chooses from the project's kind,
item counts, metric and budget; the choices it makes among gepa's options arrive as the
engine's options where the user set none. The
engine then checks its options and reflection template (Engine.choices) before anything is
spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skynet.data import Item, are_val_copies
from skynet.engine import (
    EngineSettings,
    PlanRequest,
    capabilities,
    get_engine,
    get_planner,
    is_planner,
)
from skynet.errors import SkynetError
from skynet.measure import TESTING, Observation, scoring

if TYPE_CHECKING:
    from skynet.project import Project

__all__ = ["EnginePlan", "engine_plan", "resolve_engine"]


@dataclass(frozen=True, kw_only=True)
class EnginePlan:
    """The engine a run uses, its metric-call budget (None: the engine's default) and settings,
    and why (recorded with the run and printed); for a planner (Auto), the patience and budget
    fitting it chose (its choices among gepa's options are in settings.options)."""

    name: str
    why: str
    max_metric_calls: int | None
    settings: EngineSettings
    patience: int | None = None
    fit_to_budget: bool = False  # Auto's parallel proposals shrink as the budget runs out
    # The engine runs the artifact itself, as a DSPy program (skynet.engine.Capabilities).
    runs_program: bool = False


def _named_scores(project: Project) -> bool:
    """Whether the metric returns named scores (asked once, on the first item's answer key)."""
    items = [*project.dataset.val, *project.dataset.train]
    for item in items[:1]:
        try:
            with scoring(Observation(elapsed_ms=0.0), source=TESTING):
                return bool(
                    project.metric(
                        item.input, project.metric.answer_key(item), item.expected
                    ).scores
                )
        except SkynetError:
            return False
    return False


def _engine_settings(project: Project, options: dict[str, Any]) -> EngineSettings:
    cfg = project.config
    template = cfg.engine.reflection_template
    if template not in ("", "gepa", "small"):
        template = str(project.dir / template)  # a template file, relative to the project
    return EngineSettings(
        options=options,
        reflection_template=template,
        reflection_model=project.config.models_config().model_for("reflection"),
        reflection_lm=None if isinstance(cfg.models.reflection, str) else cfg.models.reflection,
        reflection_temperature=cfg.models.reflection_temperature,
        reflection_max_tokens=cfg.models.reflection_max_tokens,
        reflection_shows=(
            None if cfg.engine.reflection_shows is None else tuple(cfg.engine.reflection_shows)
        ),
        artifact_kind=cfg.artifact.kind,
        objective=cfg.engine.objective,
        background=cfg.engine.background,
        concurrency=cfg.engine.concurrency,
    )


def _task_slots(project: Project) -> tuple[int, str] | None:
    """How many calls the task model takes at once, and its name (None: no task model)."""
    if not project.artifact.uses_task_model:
        return None  # e.g. code: each evaluation is a sandboxed process; its calls its own
    models = project.config.models_config()
    task = models.model_for("task")
    return models.settings_for(task).max_concurrent, task


def _slots_said(project: Project, said: Sequence[str]) -> tuple[str, ...]:
    """One line for each model the run calls that takes fewer calls at once than [engine]
    concurrency (its endpoint's max_concurrent, or the embedded model's one at a time), unless
    a planner's reasons (`said`) already name it: said once, at the start."""
    models = project.config.models_config()
    concurrency = project.config.engine.concurrency
    roles = ("task", "reflection") if project.artifact.uses_task_model else ("reflection",)
    lines: list[str] = []
    for name in dict.fromkeys(models.model_for(role) for role in roles):
        if not name or any(f"{name} takes" in line for line in said):
            continue
        slots = models.settings_for(name).max_concurrent
        if slots < concurrency:
            why = (
                "one llama.cpp context"
                if name.startswith("local/")
                else "its [models.endpoints] max_concurrent"
            )
            lines.append(
                f"{name} takes {slots} call(s) at once ({why}), below [engine] concurrency "
                f"{concurrency}"
            )
    return tuple(lines)


def _options_set(options: dict[str, Any]) -> frozenset[str]:
    """The names of gepa's options [engine.options] sets, at its top or in gepa_kwargs (where
    dspy.GEPA takes them): asked before the planner has chosen the engine."""
    kwargs = options.get("gepa_kwargs")
    return frozenset(options) | frozenset(kwargs if isinstance(kwargs, dict) else ())


def _with_planned_options(
    engine: str, options: dict[str, Any], chosen: Mapping[str, Any]
) -> dict[str, Any]:
    """[engine.options] with a planner's choices of gepa options (never one the user set)."""
    if not chosen:
        return options
    table = capabilities(engine).gepa_options_in  # e.g. dspy-gepa's gepa_kwargs
    if table is not None:
        kwargs = options.get(table)
        kwargs = kwargs if isinstance(kwargs, dict) else {}
        return {**options, table: {**kwargs, **_unset(chosen, kwargs)}}
    return {**options, **_unset(chosen, options)}


def _unset(chosen: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in chosen.items() if name not in given}


def resolve_engine(project: Project) -> EnginePlan:
    """The engine to run, its budget and settings, and why (recorded with the run and printed).

    Raises:
        ConfigError: the engine cannot take this artifact, or its options or reflection
            template are wrong (checked by the engine, before anything is spent).
    """
    plan = _choose_engine(project)
    engine = get_engine(plan.name)
    said = engine.choices(plan.settings)
    return dataclasses.replace(plan, why="; ".join((plan.why, *said)))


def _choose_engine(project: Project) -> EnginePlan:
    cfg = project.config
    name, kind = cfg.engine.name, cfg.artifact.kind
    options = dict(cfg.engine.options)
    user_budget, budget_said = _call_budget(project)
    if is_planner(name):
        # A planner (Auto) names the engine that runs, with its budget and options, each with
        # its reason.
        planned = get_planner(name)(
            PlanRequest(
                kind=kind,
                level=cfg.engine.auto,
                train=len(project.dataset.train),
                val=len(project.dataset.val),
                minibatch_size=cfg.engine.reflection_minibatch_size,
                named_scores=_named_scores(project),
                budget_set_by_user=user_budget,
                concurrency=cfg.engine.concurrency,
                task_slots=_task_slots(project),
                options_set=_options_set(options),
            )
        )
        can = capabilities(planned.engine)
        if can.check_artifact is not None:
            can.check_artifact(kind, cfg.artifact)
        return EnginePlan(
            name=planned.engine,
            why=f"{name}: "
            + "; ".join((*planned.reasons, *budget_said, *_slots_said(project, planned.reasons))),
            max_metric_calls=(
                planned.max_metric_calls or user_budget or cfg.budget.max_metric_calls
            ),
            settings=_engine_settings(
                project, _with_planned_options(planned.engine, options, planned.options)
            ),
            patience=planned.patience,
            fit_to_budget=planned.fit_to_budget,
            runs_program=can.runs_program,
        )
    can = capabilities(name)
    if can.check_artifact is not None:
        can.check_artifact(kind, cfg.artifact)
    return EnginePlan(
        name=name,
        why="; ".join(
            (f"engine '{name}' named in the config", *budget_said, *_slots_said(project, ()))
        ),
        max_metric_calls=user_budget or cfg.budget.max_metric_calls,
        settings=_engine_settings(project, options),
        runs_program=can.runs_program,
    )


def _call_budget(project: Project) -> tuple[int | None, tuple[str, ...]]:
    """The metric-call budget the user set (None: none set, the default applies) and, when it
    was given as [budget] max_full_evals, the line that says what it came to.

    max_full_evals = N is dspy.GEPA's: N x (train + val) metric calls, or N x train when no val
    was given (dspy.GEPA's valset=None; Skynet's val copies of the train items, which dspy
    evaluates as the same items, are not counted again).
    """
    budget = project.config.budget
    if budget.max_full_evals is None:
        given = "max_metric_calls" in budget.model_fields_set
        return (budget.max_metric_calls if given else None), ()
    train, val = project.dataset.train, project.dataset.val
    no_val = _val_copies(train, val)
    calls = budget.max_full_evals * (len(train) + (0 if no_val else len(val)))
    per_eval = f"{len(train)} train" + ("; no val given" if no_val else f" + {len(val)} val")
    return calls, (
        f"max_metric_calls = {calls} (max_full_evals = {budget.max_full_evals} x ({per_eval}))",
    )


def _val_copies(train: Sequence[Item], val: Sequence[Item]) -> bool:
    """Whether the val items are the train items again (no val given: skynet.data.val_copies)."""
    return are_val_copies(
        {item.id: (item.input, item.expected) for item in train},
        {item.id: (item.input, item.expected) for item in val},
    )


def engine_plan(project: Project) -> str:
    """The engine a run would use and why, with its options and reflection template checked.

    Raises:
        ConfigError: the engine cannot take this artifact, or a bad option or template.
    """
    return resolve_engine(project).why
