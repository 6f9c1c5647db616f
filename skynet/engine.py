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
    "EngineOutcome",
    "Engine",
    "get_engine",
    "ACCEPTED_ONE_IN",
    "gepa_metric_calls",
    "gepa_proposals",
    "Capabilities",
    "capabilities",
]

Candidate = dict[str, str]

# GEPA's budget, shared by Auto (which sizes a budget from a number of proposals) and the dry run
# (which says how many proposals a budget pays for): the seed on the val split, then per proposal
# its parent and child on a minibatch, and the accepted children on the whole val split, taken as
# one proposal in ACCEPTED_ONE_IN.
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
        frontier: gepa's Pareto frontier when Auto chose it ("instance" per val item, "hybrid"
            with named objectives); None: the engine's own default.
        patience: stop after this many proposals without a better best val score (None: never).
        fit_to_budget: Auto chose several proposals per iteration; the engine proposes fewer
            once the metric-call budget left cannot pay for them (engines.sampling).
        program: the DSPy program artifact (engines that run the program themselves).
        models: the run's model session (for engines that call models through other clients).
        score_output: scores an output the engine produced itself, with its Observation; records
            and replays like `evaluate` (the same (candidate, item, output) is scored once).
        record_failure: records a run the engine made itself that raised (the model failed, the
            program crashed) as the item's evaluation error, with its Observation, counted toward
            the error-share abort like `evaluate`'s errors.
        max_side_info_chars: each value shown to the reflection model (an output, feedback, an
            error) is cut to this many characters per example, with a note
            (skynet.side_info.cut_side_info).
        predictor_feedback: a DSPy metric's own (score, feedback) for one predictor of the
            program, called with the item's input and expected, the prediction, the trace, the
            predictor's name and its trace (skynet.dspy_metric.DspyMetric.for_predictor, which
            calls the metric as dspy.GEPA does); None when the metric is not a DSPy metric.

    `evaluate`, `score_output` and `reflect` raise BudgetExhausted when a model call they need
    was refused by the money budget: no result exists for it. From then on `should_stop` is
    True; an engine may stop at once or at its next check.
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
    frontier: str | None = None
    patience: int | None = None
    fit_to_budget: bool = False
    program: Any = None
    models: Any = None
    score_output: Callable[[Candidate, Item, Any, Any], Result] | None = None
    record_failure: Callable[[Candidate, Item, BaseException, Any], Result] | None = None
    record_lineage: Callable[[Candidate, Sequence[Candidate]], None] = lambda c, parents: None
    max_side_info_chars: int = DEFAULT_MAX_SIDE_INFO_CHARS
    predictor_feedback: (
        Callable[
            [Mapping[str, Any], Mapping[str, Any] | None, Any, Any, str, Any], tuple[float, str]
        ]
        | None
    ) = None

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

        runs_program = True        # it runs the artifact itself, as a DSPy program
                                   # (artifact.as_program, handed as ctx.program), on its own
                                   # threads in this process: [engine] executor is not used
        gepa_options_in = "gepa_kwargs"   # where gepa's own options go in [engine.options]
                                          # (Auto's choices among them); default: at its top
        @staticmethod
        def check_artifact(kind: str, settings: Any) -> None:
            # refuse, with a ConfigError, an artifact kind or [artifact] setting it cannot run
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
    )


def get_engine(name: str) -> Engine:
    """The engine registered under `name`: a built-in (skynet.registry) or a plugin's entry
    point in the group "skynet.engines".

    Raises:
        ConfigError: unknown name (the message lists the known ones).
    """
    from skynet import registry

    if name == "auto":  # Auto plans the run, then names the engine that runs it
        raise ConfigError("engine 'auto' chooses an engine; resolve it before get_engine()")
    return registry.load("engine", name)()
