"""The engine protocol and registry. Engines live in the `engines` package and are found by name
here, so the core never imports them at module level."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from skynet.data import Item
from skynet.errors import ConfigError
from skynet.evaluation import Result
from skynet.side_info import DEFAULT_MAX_SIDE_INFO_CHARS

__all__ = [
    "EngineSettings",
    "EngineContext",
    "ProgramRun",
    "EngineOutcome",
    "Engine",
    "get_engine",
    "Capabilities",
    "capabilities",
    "PlanRequest",
    "Planned",
    "Planner",
    "get_planner",
    "is_planner",
]

Candidate = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """What the user said about the engine: enough for it to check its options and say its
    choices before the run starts (Engine.choices), and to run by them.

    Attributes:
        options: [engine.options], the engine's own options by its own names; each engine
            checks them against its own configuration (an unknown name is a ConfigError naming
            the nearest known ones).
        reflection_template: [engine] reflection_template: "gepa", "small", a template file's
            path, or "" for the engine's choice by reflection model.
        reflection_model: the reflection model's name (the template choice depends on it);
            "" when reflection_lm is set.
        reflection_lm: [models] reflection given from Python as a callable (prompt -> reply,
            gepa's reflection_lm): the engine calls it itself, outside Skynet's models.
        reflection_temperature, reflection_max_tokens: [models] reflection_temperature and
            reflection_max_tokens (None: the engine's defaults).
        reflection_shows: [engine] reflection_shows: what each example in a reflection prompt
            shows ("inputs", "output", "feedback", "expected"); None: the engine's own.
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    reflection_template: str = ""
    reflection_model: str = ""
    reflection_lm: Callable[[Any], str] | None = None
    reflection_temperature: float | None = None
    reflection_max_tokens: int | None = None
    reflection_shows: tuple[str, ...] | None = None
    artifact_kind: str = "prompt"
    objective: str = ""
    background: str = ""
    concurrency: int = 4


@dataclass(frozen=True, kw_only=True)
class ProgramRun:
    """What an engine that runs the artifact itself (Capabilities.runs_program: dspy-gepa runs
    a DSPy program on its own threads) needs besides the EngineContext.

    Attributes:
        artifact: the project's artifact (skynet.artifacts.base.Artifact); the engine makes
            its own program of it (dspy-gepa: skynet.artifacts.dspy_program.as_dspy_program).
        artifact_settings: [artifact] (max_tokens, temperature, ...).
        score_output: scores an output the engine produced itself, with its Observation;
            records and replays like `evaluate` (the same (candidate, item, output) is scored
            once).
        record_failure: records a run the engine made itself that raised (the model failed,
            the program crashed) as the item's evaluation error, with its Observation, counted
            toward the error-share abort like `evaluate`'s errors.
        predictor_feedback: a DSPy metric's own (score, feedback) for one predictor of the
            program, called with the item's input and expected, the prediction, the trace,
            the predictor's name and its trace (skynet.dspy_metric.DspyMetric.for_predictor,
            which calls the metric as dspy.GEPA does); None when the metric is not a DSPy
            metric.
    """

    artifact: Any
    artifact_settings: Any
    score_output: Callable[[Candidate, Item, Any, Any], Result]
    record_failure: Callable[[Candidate, Item, BaseException, Any], Result]
    predictor_feedback: (
        Callable[
            [Mapping[str, Any], Mapping[str, Any] | None, Any, Any, str, Any], tuple[float, str]
        ]
        | None
    ) = None


@dataclass(frozen=True, kw_only=True)
class EngineContext:
    """Everything an engine needs from a run; the engine needs nothing else.

    Attributes:
        seed_candidate: the artifact's starting texts, by component name.
        train: items whose feedback the reflection model reads.
        val: items that select candidates.
        evaluate: scores a candidate on one item. It records the result, serves results already
            recorded (a resumed run pays nothing twice), and never raises for one item's failure
            (the Result carries the error); it raises only for run-level faults (the error share
            passed its limit).
        reflect: one reflection-model call: (prompt text, draw index, max_tokens or None for
            the model's own) in, reply text out.
        record_proposal: records what became of one proposal (status, detail, text, and
            the parent candidate it was made from when known).
        record_lineage: records an accepted candidate and the candidates it was made from, as
            it is accepted (candidate, parents), so a killed run keeps its lineage so far; the
            lineage the engine returns (EngineOutcome.parents) is recorded too, at the end.
        should_stop: True once the money or time budget is spent.
        max_metric_calls: the metric-call budget (None: no limit).
        seed: the engine's random seed.
        objective, background: text for the reflection model.
        minibatch_size: items per reflection step.
        concurrency: evaluations in flight at once.
        log: one line of progress or explanation for the user.
        engine_log: the engine's own chatter (kept in the run folder, not shown).
        artifact_kind: "prompt", "code" or "dspy": what the texts are.
        settings: what the user said about the engine (options, reflection template, objective,
            background, concurrency, the artifact's kind).
        patience: stop after this many proposals without a better best val score (None: never).
        fit_to_budget: Auto chose several proposals per iteration; the engine proposes fewer
            once the metric-call budget left cannot pay for them (engines.sampling).
        models: the run's model session (for engines that call models through other clients).
        program_run: what an engine that runs the artifact itself needs (ProgramRun); None for
            the others.
        max_side_info_chars: each value shown to the reflection model (an output, feedback, an
            error) is cut to this many characters per example, with a note
            (skynet.side_info.cut_side_info).

    `evaluate`, ProgramRun.score_output and `reflect` raise BudgetExhausted when a model call
    they need was refused by the money budget: no result exists for it. From then on
    `should_stop` is True; an engine may stop at once or at its next check.
    """

    seed_candidate: Candidate
    train: Sequence[Item]
    val: Sequence[Item]
    evaluate: Callable[[Candidate, Item], Result]
    reflect: Callable[[str, int, int | None], str]
    record_proposal: Callable[..., None]
    should_stop: Callable[[], bool]
    max_metric_calls: int | None
    settings: EngineSettings = field(default_factory=EngineSettings)
    seed: int = 0
    minibatch_size: int = 3
    log: Callable[[str], None] = print
    engine_log: Callable[[str], None] = lambda message: None
    patience: int | None = None
    fit_to_budget: bool = False
    models: Any = None
    record_lineage: Callable[[Candidate, Sequence[Candidate]], None] = lambda c, parents: None
    max_side_info_chars: int = DEFAULT_MAX_SIDE_INFO_CHARS
    program_run: ProgramRun | None = None

    @property
    def concurrency(self) -> int:
        return self.settings.concurrency


@dataclass(frozen=True, kw_only=True)
class EngineOutcome:
    """What an engine found: candidates in discovery order with their parents and val scores,
    and why it stopped before its budget ("" when the budget or a limit of the run's did)."""

    best_candidate: Candidate
    candidates: list[Candidate]
    parents: list[list[int | None]]
    val_scores: list[float]
    metric_calls: int
    notes: dict[str, Any] = field(default_factory=dict)
    stopped_by: str = ""


class Engine(Protocol):
    """An optimizer. Never raises for an individual item; raises only for run-level faults.

    Besides these methods, an engine class may declare what the core must know of it, so the
    core never asks for an engine by name (read by capabilities(); each has a default):

        runs_program = True        # it runs the artifact itself (handed as ctx.program_run),
                                   # on its own threads in this process: [engine] executor is
                                   # not used
        gepa_options_in = "gepa_kwargs"   # where gepa's own options go in [engine.options]
                                          # (Auto's choices among them); default: at its top
        @staticmethod
        def check_artifact(kind: str, settings: Any) -> None:
            # refuse, with a ConfigError, an artifact kind or [artifact] setting it cannot run
        @staticmethod
        def proposals_for(metric_calls: int, *, val: int, minibatch: int) -> int:
            # how many proposals a metric-call budget pays for (the dry run's reflection
            # estimate; without it the dry run says the reflection cost is unknown)
    """

    name: str

    def min_metric_calls(self, *, train: int, val: int, minibatch_size: int) -> int:
        """The smallest metric-call budget with which the engine can propose even once."""
        ...

    def choices(self, settings: EngineSettings) -> tuple[str, ...]:
        """What the engine will use that the user may not have said (a reflection prompt, its
        options), one line each with the reason; printed and recorded before the run starts.

        Raises:
            ConfigError: a bad [engine.options] entry or reflection template.
        """
        ...

    def optimize(self, ctx: EngineContext) -> EngineOutcome: ...


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the core must know of an engine (see Engine): read from its class, never from its
    name."""

    runs_program: bool = False
    gepa_options_in: str | None = None
    check_artifact: Callable[[str, Any], None] | None = None
    proposals_for: Callable[..., int] | None = None


def capabilities(name: str) -> Capabilities:
    """The capabilities the engine registered under `name` declares (defaults for those it
    does not).

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    from skynet import registry

    kind = registry.load("engine", name)
    return Capabilities(
        runs_program=bool(getattr(kind, "runs_program", False)),
        gepa_options_in=getattr(kind, "gepa_options_in", None),
        check_artifact=getattr(kind, "check_artifact", None),
        proposals_for=getattr(kind, "proposals_for", None),
    )


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """What a planner (Auto) is told about a project to choose the engine that runs it.

    Attributes:
        kind: the artifact kind ("prompt", "code", "dspy", or a plugin's).
        level: [engine] auto: "light", "medium" or "heavy".
        train, val: the item counts.
        minibatch_size: [engine] reflection_minibatch_size.
        named_scores: the metric returns named scores.
        budget_set_by_user: the metric-call budget the user set (None: the planner may size it).
        concurrency: [engine] concurrency.
        task_slots: how many calls the task model takes at once, and its name (None: the
            artifact calls no task model).
        options_set: the names of gepa's options the user set in [engine.options] (at its top
            or in gepa_kwargs): the planner chooses none of these.
    """

    kind: str
    level: str
    train: int
    val: int
    minibatch_size: int
    named_scores: bool
    budget_set_by_user: int | None
    concurrency: int = 1
    task_slots: tuple[int, str] | None = None
    options_set: frozenset[str] = frozenset()


@dataclass(frozen=True, kw_only=True)
class Planned:
    """A planner's choices, each with its reason: the engine, and what it chose for it.

    Attributes:
        engine: the engine that runs (a registered engine's name).
        reasons: one line per choice, printed and recorded with the run.
        max_metric_calls: the budget it sized (None: the user's, or the config's default).
        options: gepa's options it chose, by gepa's names (e.g. frontier_type,
            sampling_strategy): they go where the engine takes gepa's options
            (Capabilities.gepa_options_in), and never over an option the user set.
        patience: stop after this many proposals without a better best val score (None: never).
        fit_to_budget: the engine proposes fewer per iteration once the metric-call budget
            left cannot pay for the number chosen (engines.sampling).
    """

    engine: str
    reasons: tuple[str, ...]
    max_metric_calls: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    patience: int | None = None
    fit_to_budget: bool = False


# A planner: registered in skynet.registry under the kind "planner" (entry-point group
# "skynet.planners"), named in [engine] name like an engine; it names the engine that runs.
Planner = Callable[[PlanRequest], Planned]


def is_planner(name: str) -> bool:
    """Whether `name` in [engine] name is a planner (Auto) rather than an engine."""
    from skynet import registry

    return registry.is_planner(name)


def get_planner(name: str) -> Planner:
    """The planner registered under `name`.

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    from skynet import registry

    return registry.load("planner", name)


def get_engine(name: str) -> Engine:
    """The engine registered under `name`: a built-in (skynet.registry) or a plugin's entry
    point in the group "skynet.engines".

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    from skynet import registry

    if registry.is_planner(name):  # e.g. Auto: it plans the run, naming the engine
        raise ConfigError(f"'{name}' is a planner that names an engine; plan the run first")
    return registry.load("engine", name)()
