"""The engine plan: which engine a run uses, with what budget and settings, and why.

A project names its engine, or "auto": Auto's rules (engines/auto.py, loaded by name, never
imported eagerly) choose from the project's kind, item counts, metric and budget; the choices
it makes among gepa's options arrive as the engine's options where the user set none. The
engine then checks its options and reflection template (Engine.choices) before anything is
spent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from skynet import registry
from skynet.data import Item, are_val_copies
from skynet.engine import EngineSettings, capabilities, get_engine
from skynet.errors import SkynetError
from skynet.measure import TESTING, Observation, scoring

if TYPE_CHECKING:
    from skynet.project import Project

__all__ = ["EnginePlan", "engine_plan", "resolve_engine"]


@dataclass(frozen=True, kw_only=True)
class EnginePlan:
    """The engine a run uses, its metric-call budget (None: the engine's default) and settings,
    and why (recorded with the run and printed); for Auto, the frontier, patience and budget
    fitting it chose."""

    name: str
    why: str
    max_metric_calls: int | None
    settings: EngineSettings
    frontier: str | None = None  # None: the engine's own default
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


def _option_set(options: dict[str, Any], name: str) -> bool:
    """Whether [engine.options] sets gepa's option `name`, at its top or in gepa_kwargs (where
    dspy.GEPA takes it): asked before Auto has chosen the engine."""
    kwargs = options.get("gepa_kwargs")
    return name in options or (isinstance(kwargs, dict) and name in kwargs)


def _with_auto_options(
    engine: str, options: dict[str, Any], chosen: dict[str, str]
) -> dict[str, Any]:
    """[engine.options] with Auto's choices of gepa options where the user set none."""
    if not chosen:
        return options
    table = capabilities(engine).gepa_options_in  # e.g. dspy-gepa's gepa_kwargs
    if table is not None:
        kwargs = options.get(table)
        return {**options, table: {**(kwargs if isinstance(kwargs, dict) else {}), **chosen}}
    return {**options, **chosen}


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
    if name == "auto":
        # Auto is a planner registered among the engines (skynet.registry): it names the engine
        # that runs, with its budget and options, each with its reason.
        auto_plan = registry.load("engine", "auto")
        user_budget, budget_said = _call_budget(project)
        plan = auto_plan(
            kind=kind,
            level=cfg.engine.auto,
            train=len(project.dataset.train),
            val=len(project.dataset.val),
            minibatch_size=cfg.engine.reflection_minibatch_size,
            named_scores=_named_scores(project),
            budget_set_by_user=user_budget,
            concurrency=cfg.engine.concurrency,
            task_slots=_task_slots(project),
            sampling_set_by_user=_option_set(options, "sampling_strategy"),
            selection_set_by_user=_option_set(options, "selection_strategy"),
        )
        chosen = {
            name: value
            for name, value in (
                ("sampling_strategy", plan.sampling),
                ("selection_strategy", plan.selection),
            )
            if value is not None
        }
        can = capabilities(plan.engine)
        if can.check_artifact is not None:
            can.check_artifact(kind, cfg.artifact)
        return EnginePlan(
            name=plan.engine,
            why="auto: " + "; ".join((*plan.reasons, *budget_said)),
            max_metric_calls=plan.max_metric_calls or user_budget or cfg.budget.max_metric_calls,
            settings=_engine_settings(project, _with_auto_options(plan.engine, options, chosen)),
            frontier=plan.frontier,
            patience=plan.patience,
            fit_to_budget=plan.fit_to_budget,
            runs_program=can.runs_program,
        )
    can = capabilities(name)
    if can.check_artifact is not None:
        can.check_artifact(kind, cfg.artifact)
    user_budget, budget_said = _call_budget(project)
    return EnginePlan(
        name=name,
        why="; ".join((f"engine '{name}' named in the config", *budget_said)),
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
