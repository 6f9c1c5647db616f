"""The DSPy GEPA engine: `dspy.GEPA` over a DSPy program, scored by the run's metric.

dspy.GEPA runs the program itself; Skynet wraps it so that each call is metered (the Observation
travels with the prediction) and its model calls go through skynet.models. The metric adapter
turns score(input, output, expected) into dspy.GEPA's (gold, pred, trace, pred_name, pred_trace)
→ dspy.Prediction(score, feedback). dspy.GEPA asks the metric a second time for feedback: that
call is served from the first result for the same (candidate, item, output), so the metric and
any judge run once and the score never changes between the two calls.

The feedback (and an error's text) is cut to ctx.max_side_info_chars per example, with a note
(skynet.side_info), before dspy.GEPA puts it in a reflection prompt. A call the money budget
refuses inside the program or the metric is one dspy.GEPA scores as a failure (nothing is
recorded); its stop callback then ends the run, which takes its best from the records.

dspy.GEPA runs with its own defaults (merge on, skip_perfect_score on, its own reflection prompt)
unless [engine.options] names dspy.GEPA's own constructor arguments (engines.options). Skynet sets
only what it owns: the budget, the reflection model (with [models] reflection_temperature and
reflection_max_tokens), threads, the seed, and the stop callback. From Python, [engine.options]
takes dspy.GEPA's callables (instruction_proposer, component_selector) as they are.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from typing import Any, cast

from engines.budget import gepa_proposals
from engines.options import dspy_gepa_options
from engines.sampling import fit_options
from engines.stops import PerfectOnVal
from engines.verdicts import Verdicts
from skynet.data import Item
from skynet.engine import Candidate, EngineContext, EngineOutcome, EngineSettings
from skynet.errors import BudgetExhausted, ConfigError, ModelError
from skynet.python_objects import python_object_text, recordable
from skynet.side_info import cut_text

__all__ = ["DspyGepaEngine"]

_ID_FIELD = "skynet_item_id"
_INNER = "inner"


def _as_failure(exc: Exception) -> Exception:
    """A program's exception as Skynet records it: the model's own failure stays a ModelError
    (not final: a resume asks again), anything else is the candidate's (ProgramFailed)."""
    from skynet.errors import ProgramFailed

    failure: Exception = exc
    while not isinstance(failure, ModelError) and isinstance(failure.__cause__, Exception):
        failure = failure.__cause__  # dspy may wrap the LM's exception in its own
    if isinstance(failure, ModelError):
        return failure
    wrapped = ProgramFailed(f"the program raised {type(exc).__name__}: {exc}")
    wrapped.__cause__ = exc
    return wrapped


class _Proposals(Verdicts):
    """gepa's callbacks inside dspy.GEPA: each reflection's proposal recorded, as the gepa engine
    records its own ("proposed", or "empty" / "unchanged" when the reflection model gave nothing
    new), each merge dspy.GEPA tries, and gepa's verdict on each (engines.verdicts); each
    candidate accepted into the pool is recorded with its parents as it is accepted (a killed
    run keeps its lineage so far)."""

    def proposal_made(self, event: Any, parent: Candidate) -> None:
        for name, text in event["new_instructions"].items():
            component = _component(name)
            if not text.strip():
                status = "empty"
            elif text.strip() == parent.get(self.rename(name), "").strip():
                status = "unchanged"
            else:
                status = "proposed"
            self.ctx.record_proposal(
                status=status, detail=f"iteration {event['iteration']}: {component}", text=text
            )

    def on_merge_attempted(self, event: Any) -> None:
        parents = ", ".join(str(i) for i in event["parent_ids"])
        self.ctx.record_proposal(
            status="merged",
            detail=f"iteration {event['iteration']}: merge of candidates {parents}",
            text="\n\n".join(f"{k}: {v}" for k, v in event["merged_candidate"].items()),
        )


class _Lines(io.TextIOBase):
    """A text stream whose complete lines go to `say` (DSPy's progress bars, off stdout)."""

    def __init__(self, say: Any) -> None:
        self.say = say
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = re.split(r"[\r\n]", self.pending)
        for line in lines:
            if line.strip():
                self.say(line.strip())
        return len(text)


def _component(name: str) -> str:
    """The wrapper's predictor name as the artifact's component name."""
    if name == _INNER:
        return "self"
    return name.removeprefix(f"{_INNER}.")


def _inner(component: str) -> str:
    """The artifact's component name as the wrapper's predictor name (_component's inverse)."""
    return _INNER if component == "self" else f"{_INNER}.{component}"


def _by_component(table: Any) -> dict[str, Any]:
    return {_component(k): v for k, v in dict(table).items()}


class _OwnNames:
    """A user's instruction_proposer or component_selector, shown the program's own predictor
    names, as under raw dspy.GEPA, not those of the wrapper that meters the program."""

    def __init__(self, own: Any, selector: bool) -> None:
        self.own = own
        self.selector = selector

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.selector:  # (state, trajectories, subsample_scores, candidate_idx, candidate)
            args = (*args[:4], _by_component(args[4])) if len(args) > 4 else args
            if "candidate" in kwargs:
                kwargs["candidate"] = _by_component(kwargs["candidate"])
            return [_inner(name) for name in self.own(*args, **kwargs)]
        # dspy calls a proposer by keyword: candidate, reflective_dataset, components_to_update.
        texts = self.own(
            candidate=_by_component(kwargs["candidate"]),
            reflective_dataset=_by_component(kwargs["reflective_dataset"]),
            components_to_update=[_component(n) for n in kwargs["components_to_update"]],
        )
        return {_inner(name): text for name, text in dict(texts).items()}


class DspyGepaEngine:
    """dspy.GEPA, with the run's Evaluation as its metric."""

    name = "dspy-gepa"
    # dspy.GEPA runs the program itself (ctx.program), on its own threads in this process.
    runs_program = True
    gepa_options_in = "gepa_kwargs"  # gepa's own options go through dspy.GEPA's gepa_kwargs
    proposals_for = staticmethod(gepa_proposals)  # dspy.GEPA spends its budget as gepa does

    @staticmethod
    def check_artifact(kind: str, settings: Any) -> None:
        """Refuse what dspy.GEPA cannot run: code, and a prompt that sends each row's tools."""
        if kind == "code":
            raise ConfigError(
                "engine 'dspy-gepa' optimizes DSPy programs and prompts, and [artifact] kind is "
                "'code'; use engine 'gepa' (or 'auto')"
            )
        if getattr(settings, "tools", None):
            raise ConfigError(
                "engine 'dspy-gepa' cannot send each row's tools ([artifact] tools = 'row'); use "
                "engine 'gepa' (or 'auto')"
            )

    def min_metric_calls(self, *, train: int, val: int, minibatch_size: int) -> int:
        return val + 2 * min(minibatch_size, train)

    def choices(self, settings: EngineSettings) -> tuple[str, ...]:
        if settings.reflection_template:
            raise ConfigError(
                f"[engine] reflection_template = '{settings.reflection_template}' applies to "
                "the gepa engine; dspy.GEPA proposes with DSPy's own instruction prompt "
                "(drop the key, or use engine 'gepa' on a prompt)"
            )
        if settings.reflection_shows is not None:
            raise ConfigError(
                f"[engine] reflection_shows = {list(settings.reflection_shows)} applies to the "
                "gepa engine; dspy.GEPA shows each predictor's inputs, outputs and feedback "
                "(drop the key, or use engine 'gepa' on a prompt)"
            )
        if settings.reflection_lm is not None:
            raise ConfigError(
                "[models] reflection is a callable (gepa's reflection_lm form), which dspy.GEPA "
                "does not take: it reflects through a dspy LM; give a model name, or write the "
                'proposals yourself with engine={"options": {"instruction_proposer": fn}}'
            )
        options = dspy_gepa_options(settings.options)
        said = ["reflection prompt: dspy.GEPA's own"]
        proposer = options.get("instruction_proposer")
        if proposer is not None:
            said.append(
                f"proposals: written by your instruction_proposer {python_object_text(proposer)}"
                ": their model calls are not measured"
            )
        if settings.options:
            said.append(
                "dspy.GEPA options: "
                + ", ".join(f"{k} = {recordable(v)!r}" for k, v in settings.options.items())
            )
        merge = options.get("use_merge", True)
        said.append(
            f"merge {'on' if merge else 'off'} ({'set' if 'use_merge' in options else 'dspy.GEPA default'})"
        )
        return tuple(said)

    def optimize(self, ctx: EngineContext) -> EngineOutcome:
        import dspy

        from skynet.artifacts.dspy_program import as_dspy_program
        from skynet.measure import metering
        from skynet.models.dspy_lm import SkynetLM, take_over, watch

        run = ctx.program_run
        if run is None or ctx.models is None:
            raise TypeError("the dspy-gepa engine runs the artifact itself: ctx.program_run")
        program_artifact = as_dspy_program(run.artifact, run.artifact_settings)
        score_output, record_failure = run.score_output, run.record_failure
        models = ctx.models
        limit = ctx.max_side_info_chars
        inputs = list(ctx.val[0].input) if ctx.val else list(ctx.train[0].input)

        class Metered(dspy.Module):
            """The program, with each call metered and its candidate noted on the prediction."""

            def __init__(self, inner: Any) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, **kwargs: Any) -> Any:
                item = items.get(str(kwargs.pop(_ID_FIELD, "")))
                candidate = program_artifact.candidate_of(self, _component)
                # The program's own LMs (set_lm, an LM attribute) on Skynet's path as task
                # calls, on dspy.GEPA's copy; an LM that cannot be is seen as unmeasured.
                take_over(self.inner, models, "task")
                with metering(None) as meter, watch(models, "task"):
                    try:
                        prediction = self.inner(**program_artifact.arguments(kwargs))
                    except BudgetExhausted:
                        raise  # refused: no result exists, nothing is recorded
                    except Exception as exc:
                        # dspy.GEPA scores a raising program as a failure and never calls the
                        # metric: record it as the item's error, then let dspy.GEPA do as ever.
                        if item is not None:
                            record_failure(candidate, item, _as_failure(exc), meter.observation())
                        raise
                object.__setattr__(prediction, "_skynet_observation", meter.observation())
                object.__setattr__(prediction, "_skynet_candidate", candidate)
                return prediction

        def output_of(prediction: Any) -> Any:
            fields = dict(prediction.toDict())
            return next(iter(fields.values())) if len(fields) == 1 else fields

        def metric(
            gold: Any,
            pred: Any,
            trace: Any = None,
            pred_name: str | None = None,
            pred_trace: Any = None,
        ) -> Any:
            item = items[getattr(gold, _ID_FIELD)]
            candidate: Candidate = getattr(pred, "_skynet_candidate", {})
            result = score_output(
                candidate, item, output_of(pred), getattr(pred, "_skynet_observation", None)
            )
            if not result.ok:
                return dspy.Prediction(
                    score=0.0, feedback=cut_text(f"This example failed: {result.error}", limit)
                )
            feedback = cut_text(result.feedback or "", limit)
            if pred_name is not None and run.predictor_feedback is not None:
                # dspy.GEPA asks for one predictor's feedback: a DSPy metric answers it itself,
                # with that predictor's name and trace, as under raw dspy.GEPA.
                try:
                    score, own = run.predictor_feedback(
                        item.input, item.expected, pred, trace, _component(pred_name), pred_trace
                    )
                except Exception as exc:  # noqa: BLE001 — the recorded feedback stands
                    ctx.engine_log(f"the metric's feedback for {pred_name} raised: {exc!r}")
                else:
                    return dspy.Prediction(score=score, feedback=cut_text(own, limit))
            if result.scores:  # named scores feed dspy.GEPA's objective frontier
                return dspy.Prediction(
                    score=float(result.score or 0.0),
                    feedback=feedback,
                    objective_scores=dict(result.scores),
                )
            return dspy.Prediction(score=float(result.score or 0.0), feedback=feedback)

        items = {item.id: item for item in (*ctx.train, *ctx.val)}

        def example(item: Item) -> Any:
            fields = {**item.input, **(item.expected or {}), _ID_FIELD: item.id}
            # The item's id travels as an input so that a run that raises is recorded on its
            # item; Metered.forward takes it off before the program sees its inputs.
            return dspy.Example(**fields).with_inputs(*inputs, _ID_FIELD)

        student = Metered(program_artifact.with_candidate(dict(ctx.seed_candidate)))
        task_lm = SkynetLM(
            ctx.models,
            max_tokens=program_artifact.max_tokens,
            temperature=program_artifact.temperature,
        )
        options = dspy_gepa_options(ctx.settings.options)
        for name, selector in (("instruction_proposer", False), ("component_selector", True)):
            if callable(options.get(name)):  # a name ("all") goes to dspy.GEPA as it is
                options[name] = _OwnNames(options[name], selector)
        gepa_kwargs = dict(options.pop("gepa_kwargs", {}))
        gepa_kwargs = fit_options(gepa_kwargs, ctx)
        # dspy.GEPA's own perfect_score (1.0 unless set) is the top score here too.
        perfect = PerfectOnVal(ctx, options.get("perfect_score"))
        # The embedded small models ramble to any limit; a real one gets its own, as in DSPy.
        small = ctx.settings.reflection_model.startswith("local/")
        reflection_max_tokens = ctx.settings.reflection_max_tokens or (512 if small else None)
        optimizer = dspy.GEPA(
            metric=metric,
            max_metric_calls=ctx.max_metric_calls,
            reflection_minibatch_size=min(ctx.minibatch_size, len(ctx.train)),
            # Typed as dspy.LM; any BaseLM serves at run time.
            reflection_lm=cast(
                Any,
                SkynetLM(
                    ctx.models,
                    role="reflection",
                    max_tokens=reflection_max_tokens,
                    temperature=ctx.settings.reflection_temperature or 0.0,
                ),
            ),
            num_threads=ctx.concurrency,
            seed=ctx.seed,
            track_stats=True,
            **options,
            gepa_kwargs={
                **gepa_kwargs,
                "stop_callbacks": [lambda state: ctx.should_stop(), perfect],
                "callbacks": [
                    *gepa_kwargs.get("callbacks", ()),
                    _Proposals(ctx, lambda n: program_artifact.component(_component(n))),
                ],
            },
        )
        # dspy.GEPA logs every iteration at INFO; Skynet's progress line says what matters.
        dspy_log = logging.getLogger("dspy")
        level = dspy_log.level
        dspy_log.setLevel(logging.WARNING)
        # DSPy's "Average Metric" bars write to stdout, where the report goes, and gepa's bar and
        # DSPy's error log (a traceback per failed example) to stderr, where Skynet's progress
        # goes (on the stream it holds): all of it goes to the engine log, with the rest of the
        # engine's own chatter. The errors themselves are recorded on their items.
        chatter = _Lines(ctx.engine_log)
        try:
            with (
                dspy.context(lm=task_lm),
                contextlib.redirect_stdout(chatter),
                contextlib.redirect_stderr(chatter),
            ):
                optimized = optimizer.compile(
                    student,
                    trainset=[example(i) for i in ctx.train],
                    valset=[example(i) for i in ctx.val],
                )
        finally:
            dspy_log.setLevel(level)

        details = optimized.detailed_results
        return EngineOutcome(
            best_candidate=program_artifact.candidate_of(optimized, _component),
            candidates=[program_artifact.candidate_of(c, _component) for c in details.candidates],
            parents=[list(p) for p in details.parents],
            val_scores=[float(s) for s in details.val_aggregate_scores],
            metric_calls=int(getattr(details, "total_metric_calls", 0) or 0),
            stopped_by=perfect.said,
        )
