"""The GEPA engine: skynet's Evaluation driven by `gepa.optimize_anything`.

The evaluator hands GEPA (score, side_info) with the metric's feedback, named scores, the input,
the output and the expected output, so the reflection model reads why an output was wrong.
Reflection calls go through skynet's models (cached, governed, costed in the reflection ledger).

Small reflection models (the embedded SmolLM2-135M) often answer with an empty code fence or the
same text back. Each such reply is recorded as a proposal with status "empty" or "unchanged" and
asked again with a new draw; after three misses GEPA is handed the parent's text, which its
minibatch check rejects at no model cost (the parent's results are replayed from the run records).
A reflection call that fails (after the model layer's retries) is recorded as "failed"; after
three failures in a row the run stops and the error is raised, instead of spending the budget on
evaluations that can never lead anywhere.

What the reflection model reads is bounded: every side-info value (input, output, feedback,
error, named scores, the metric's other keys) is cut to ctx.max_side_info_chars per example, with
a note, and what the candidate or the metric wrote (output, feedback, error, the metric's other
values) is quoted line by line, so it cannot open a section of the prompt (skynet.side_info). A
call the money budget refuses stops the run: an evaluation it refused is handed to GEPA as a
failed example (never recorded; GEPA stops at its next check, and the run takes its best from
the records), a refused reflection keeps the parent.

The reflection prompt is gepa's own (`optimize_anything_reflection_prompt_template`, or gepa's
builder when [engine] objective or background is set) for every reflection model but the
embedded `local/...` ones, which get Skynet's short template; [engine] reflection_template
overrides the choice ("gepa", "small" or a template file). [engine.options] sets GEPAConfig's own
fields (engines.options); otherwise gepa's defaults hold. With a sampling strategy that proposes
several candidates per iteration, their reflection calls go out in parallel (batch_complete).

[engine] reflection_shows keeps only the named parts of each example (inputs, output, feedback,
expected; all four unless set); named scores stay, as gepa's frontier reads them. From Python,
[models] reflection may be a callable (prompt -> reply, as gepa's reflection_lm), called once per
prompt and recorded as unmeasured calls, and [engine.options] may hold gepa's callables
(custom_candidate_proposer, module_selector), handed to gepa as they are; each proposal a custom
proposer writes is recorded.

GEPA's own log lines go to ctx.engine_log (the run folder's engine.log), not to the terminal.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engines.budget import gepa_proposals
from engines.options import gepa_options
from engines.sampling import fit_options
from engines.stops import PerfectOnVal
from engines.verdicts import Verdicts
from skynet.data import Item
from skynet.engine import Candidate, EngineContext, EngineOutcome, EngineSettings
from skynet.errors import BudgetExhausted, ConfigError, ModelError
from skynet.python_objects import python_object_text, recordable
from skynet.side_info import cut_side_info, quoted

__all__ = [
    "GepaEngine",
    "REFLECTION_TEMPLATE",
    "CODE_REFLECTION_TEMPLATE",
    "reflection_template",
    "TemplateChoice",
    "choose_template",
]

# Short and plain on purpose: it must work for a 135M-parameter model as well as a large one.
REFLECTION_TEMPLATE = """You improve an instruction given to an AI assistant.

Current instruction:
```
<curr_param>
```

How the assistant did on some examples, with feedback on each:
```
<side_info>
```

Write a better instruction that fixes the problems the feedback describes. Reply with the new instruction only, inside ``` fences."""


CODE_REFLECTION_TEMPLATE = """You improve a Python program. It defines run(input), which is called once per example.

Current program:
```
<curr_param>
```

How the program did on some examples, with feedback on each:
```
<side_info>
```

Write a better program that fixes the problems the feedback describes. Keep the function run(input). Reply with the whole new program only, inside ``` fences."""


def reflection_template(objective: str = "", background: str = "", kind: str = "prompt") -> str:
    """The template for an artifact kind, with the run's objective and background (GEPA takes
    either a template or those two, so they are written into the template here)."""
    base = CODE_REFLECTION_TEMPLATE if kind == "code" else REFLECTION_TEMPLATE
    extra = ""
    if objective.strip():
        extra += f"\nThe goal: {objective.strip()}\n"
    if background.strip():
        extra += f"\nWhat to know: {background.strip()}\n"
    if not extra:
        return base
    head, tail = base.split("\n\nCurrent ", 1)
    return f"{head}\n{extra}\nCurrent {tail}"


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    """The reflection prompt a run uses, and why.

    Attributes:
        name: "gepa", "small" or the template file's path.
        text: the template handed to gepa; None for gepa's own (its default template, or its
            builder's from objective and background, which optimize_anything makes itself).
        reason: one line for the user and the run record.
        max_tokens: the reflection reply's cap: 512 for the short template (small models
            ramble to the limit), None (the model's own) otherwise, as raw gepa sends.
    """

    name: str
    text: str | None
    reason: str
    max_tokens: int | None


def choose_template(
    setting: str, model: str, *, kind: str = "prompt", objective: str = "", background: str = ""
) -> TemplateChoice:
    """The reflection template for [engine] reflection_template = `setting` ("" = by model).

    Raises:
        ConfigError: a template file that cannot be read, lacks gepa's placeholders, or comes
            with an objective or background (gepa takes a template or those, not both).
    """
    if setting == "small" or (not setting and model.startswith("local/")):
        why = (
            "set in the config"
            if setting
            else f"the reflection model {model} is an embedded small model"
        )
        return TemplateChoice(
            "small",
            reflection_template(objective, background, kind),
            f"reflection prompt: Skynet's short template ({why})",
            512,
        )
    if setting in ("", "gepa"):
        built = " built from [engine] objective/background" if objective or background else ""
        why = "set in the config" if setting else f"the reflection model is {model}"
        return TemplateChoice(
            "gepa", None, f"reflection prompt: gepa's own template{built} ({why})", None
        )
    path = Path(setting)
    where = f"[engine] reflection_template ({path})"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(
            f'{where}: cannot read the template ({reason}); give "gepa", "small" or the '
            "path of a UTF-8 text file, relative to the project"
        ) from None
    missing = [p for p in ("<curr_param>", "<side_info>") if p not in text]
    if missing:
        raise ConfigError(
            f"{where}: the template lacks {' and '.join(missing)}; gepa fills the current text "
            "into <curr_param> and the examples with feedback into <side_info>"
        )
    if objective.strip() or background.strip():
        raise ConfigError(
            f"{where} comes with [engine] objective/background; gepa takes a template or those, "
            "not both: write them into the template file, or drop the template"
        )
    return TemplateChoice(
        str(path), text, f"reflection prompt: the template in {path} (set in the config)", None
    )


def _current_pattern(template: str) -> re.Pattern[str]:
    """Reads the current text back out of a prompt made from `template` (for "unchanged")."""
    pattern, seen = "", False
    for part in re.split(r"(<curr_param>|<side_info>)", template):
        if part == "<curr_param>":
            pattern += "(?P=current)" if seen else "(?P<current>.*?)"
            seen = True
        elif part == "<side_info>":
            pattern += ".*?"
        else:
            pattern += re.escape(part)
    return re.compile(pattern + r"\Z", re.S)


def _gepa_template(objective: str, background: str) -> str:
    """The template gepa itself fills: its default, or its builder's."""
    from gepa.optimize_anything import (
        _build_reflection_prompt_template,
        optimize_anything_reflection_prompt_template,
    )

    if objective or background:
        return _build_reflection_prompt_template(objective=objective, background=background)
    return optimize_anything_reflection_prompt_template


def _tasks_per_iteration(strategy: Any) -> int:
    """How many proposals gepa's sampling strategy makes per iteration."""
    if strategy is None:
        return 1
    return max(1, int(getattr(strategy, "p", 1)) * int(getattr(strategy, "n", 1)))


_DRAWS = 3
_FAILURES_BEFORE_STOP = 3


def _extract(reply: str) -> str:
    from gepa.strategies.instruction_proposal import InstructionProposalSignature

    return InstructionProposalSignature.output_extractor(reply)["new_instruction"]


class _Reflector:
    """GEPA's LanguageModel: prompt in, reply out, with failed proposals recorded and redrawn.

    With [models] reflection a callable (given from Python), each prompt goes to it as gepa
    would send it, once (no redraw): its calls are outside Skynet's models, recorded as
    unmeasured reflection calls (time seen from here; tokens and cost unknown, never $0).
    """

    def __init__(
        self,
        ctx: EngineContext,
        template: str,
        max_tokens: int | None,
        own: Callable[[Any], str] | None = None,
    ) -> None:
        self.ctx = ctx
        self.current = _current_pattern(template)
        self.max_tokens = max_tokens
        self.own = own
        self.total_cost = 0.0  # GEPA reads this; skynet keeps the real ledger
        self.failures_in_a_row = 0
        self.fatal: ModelError | None = None
        self._lock = threading.Lock()

    def batch_complete(self, messages_list: list[list[dict[str, Any]]]) -> list[str]:
        """Several proposals' reflection calls at once (gepa's multi-proposal sampling)."""
        if len(messages_list) <= 1:
            return [self(m) for m in messages_list]
        with ThreadPoolExecutor(max_workers=min(len(messages_list), 16)) as pool:
            return list(pool.map(self, messages_list))

    def _failed(self, exc: ModelError) -> bool:
        """Counts a failure; True once reflection has failed too often in a row."""
        with self._lock:
            self.failures_in_a_row += 1
            if self.failures_in_a_row >= _FAILURES_BEFORE_STOP:
                self.fatal = self.fatal or exc
            return self.fatal is not None

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        """The proposal for `prompt`: the first usable of up to _DRAWS draws. Draw 0 goes alone
        (it is usually usable); when it is not, the other draws go at once, not one after
        another (one after another under a money budget), and the first usable in draw order is
        taken, so the run is the same whatever the order the replies arrive in."""
        text = (
            prompt
            if isinstance(prompt, str)
            else "\n\n".join(str(m.get("content", "")) for m in prompt)
        )
        found = self.current.match(text)
        current = found.group("current").strip() if found else ""
        taken = self._settle(0, self._draw(text, prompt, 0), current)
        if taken is None and self.own is None and self.fatal is None and self._money_budget():
            # Under a money budget, one after another: two draws at once would each hold their
            # worst case, and the second be refused where one after another both fit.
            for draw in range(1, _DRAWS):
                if taken is not None or self.fatal is not None:
                    break
                taken = self._settle(draw, self._draw(text, prompt, draw), current)
        elif taken is None and self.own is None and self.fatal is None:
            rest = range(1, _DRAWS)
            with ThreadPoolExecutor(max_workers=len(rest)) as pool:
                got = list(pool.map(lambda draw: self._draw(text, prompt, draw), rest))
            for draw, outcome in zip(rest, got, strict=True):
                if taken is None and self.fatal is None:
                    taken = self._settle(draw, outcome, current)
                elif isinstance(outcome, str) and _usable(outcome, current):
                    # Drawn at once with the one taken, and paid for: recorded, not used.
                    self.ctx.record_proposal(
                        status="unused",
                        detail=f"draw {draw}: an earlier draw was usable",
                        text=_extract(outcome).strip(),
                    )
        if taken is _STOP or taken is None:
            if taken is None:
                self.ctx.log(
                    f"reflection gave no usable proposal in {_DRAWS} draws; keeping the parent"
                )
            return f"```\n{current}\n```"
        return f"```\n{taken}\n```"

    def _money_budget(self) -> bool:
        """Whether the run has a money budget ([budget] max_cost_usd)."""
        budget = getattr(self.ctx.models, "budget", None)
        return bool(getattr(budget, "limited", False))

    def _draw(self, text: str, prompt: Any, draw: int) -> str | BaseException:
        """One reflection call's reply, or the BudgetExhausted/ModelError it raised."""
        try:
            if self.own is None:
                return self.ctx.reflect(text, draw, self.max_tokens)
            return _called(self.ctx, self.own, prompt)
        except (BudgetExhausted, ModelError) as exc:
            return exc

    def _settle(self, draw: int, outcome: str | BaseException, current: str) -> Any:
        """Records what became of one draw: its proposal (usable), None (none: try another,
        unless reflection failed too often in a row: self.fatal), or _STOP (the budget is
        spent: the run stops at GEPA's next check)."""
        if isinstance(outcome, BudgetExhausted):
            self.ctx.record_proposal(status="failed", detail=f"draw {draw}: {outcome}")
            return _STOP  # the run stops at GEPA's next check
        if isinstance(outcome, ModelError):
            self.ctx.record_proposal(status="failed", detail=f"draw {draw}: {outcome}")
            self._failed(outcome)
            return None
        assert isinstance(outcome, str)
        with self._lock:
            self.failures_in_a_row = 0
        proposal = _extract(outcome).strip()
        if not proposal:
            self.ctx.record_proposal(
                status="empty", detail=f"draw {draw}: the reply held no new text", text=outcome
            )
        elif proposal == current:
            self.ctx.record_proposal(
                status="unchanged", detail=f"draw {draw}: the reply repeated the text", text=outcome
            )
        else:
            self.ctx.record_proposal(status="proposed", detail=f"draw {draw}", text=proposal)
            return proposal
        return None


_STOP = object()  # a draw that ends the proposal: the budget is spent


def _usable(reply: str, current: str) -> bool:
    proposal = _extract(reply).strip()
    return bool(proposal) and proposal != current


def _called(ctx: EngineContext, own: Callable[[Any], str], prompt: Any) -> str:
    """The user's reflection callable's reply to `prompt`, its call recorded as unmeasured."""
    from skynet.models.ledger import CallRecord

    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    began = time.monotonic()
    error: BaseException | None = None
    reply: Any = ""
    try:
        reply = own(prompt)
    except BaseException as exc:  # recorded, then raised as raw gepa would
        error = exc
        raise
    finally:
        if ctx.models is not None:
            ctx.models.absorb(
                CallRecord(
                    role="reflection",
                    model=python_object_text(own),
                    elapsed_ms=(time.monotonic() - began) * 1000,
                    ok=error is None,
                    error="" if error is None else f"{type(error).__name__}: {error}",
                    prompt=json.dumps(messages, ensure_ascii=False, default=str),
                    reply=json.dumps(str(reply), ensure_ascii=False),
                    measured=False,
                )
            )
    return str(reply)


class _RecordedProposer:
    """gepa's custom_candidate_proposer, called as gepa calls it, with each proposal recorded
    (its model calls, if any, are the user's own: not measured)."""

    def __init__(self, ctx: EngineContext, proposer: Callable[..., dict[str, str]]) -> None:
        self.ctx = ctx
        self.proposer = proposer

    def __call__(
        self,
        candidate: dict[str, str],
        reflective_dataset: Any,
        components_to_update: list[str],
    ) -> dict[str, str]:
        texts = self.proposer(candidate, reflective_dataset, components_to_update)
        for name, text in dict(texts).items():
            said = f"custom_candidate_proposer: {name}"
            if not str(text).strip():
                self.ctx.record_proposal(status="empty", detail=said, text=str(text))
            elif str(text).strip() == candidate.get(name, "").strip():
                self.ctx.record_proposal(status="unchanged", detail=said, text=str(text))
            else:
                self.ctx.record_proposal(status="proposed", detail=said, text=str(text))
        return texts


# What each [engine] reflection_shows entry lets into an example's side info. Named scores stay
# whatever it says: gepa's frontier reads them there.
_SHOWS = {
    "inputs": ("Input",),
    "expected": ("Expected",),
    "output": ("Output", "Error"),
    "feedback": ("Feedback",),
}


def evaluated(
    ctx: EngineContext, candidate: Candidate, example: Item
) -> tuple[float, dict[str, Any]]:
    """One evaluation as gepa is shown it: its score (0 for an error, which the records keep)
    and its side information (Input, Expected, Output, Feedback, named scores, the metric's
    other keys), each value quoted and cut to ctx.max_side_info_chars."""
    limit = ctx.max_side_info_chars
    side: dict[str, Any] = {"Input": example.input, "Expected": example.expected}
    try:
        result = ctx.evaluate(dict(candidate), example)
    except BudgetExhausted as exc:
        # Not evaluated, not recorded; GEPA's next stop check ends the run.
        side["Error"] = quoted(f"not evaluated: {exc}", limit)
        return 0.0, cut_side_info(side, limit)
    # What the candidate wrote, and what the metric wrote about it (feedback often
    # quotes the output), is quoted: no line of it can pass for a section of the prompt.
    if result.ok:
        side["Output"] = quoted(result.output, limit)
        side["Feedback"] = quoted(result.feedback, limit)
        if result.scores:
            side["scores"] = dict(result.scores)
        # What score() printed is the user's own debugging, kept in the records only.
        side.update(
            {
                k: quoted(v, limit)
                for k, v in result.extra.items()
                if k not in side and k != "metric_stdout"
            }
        )
        return float(result.score or 0.0), cut_side_info(side, limit)
    # An error is not a wrong answer; GEPA needs a number, the records keep the error.
    side["Error"] = quoted(result.error, limit)
    side["Feedback"] = quoted(f"This example failed with an error: {result.error}", limit)
    return 0.0, cut_side_info(side, limit)


def _shown(side: dict[str, Any], shows: tuple[str, ...] | None) -> dict[str, Any]:
    """The side info with only what [engine] reflection_shows lets in (None: everything); the
    metric's other keys go with "feedback"."""
    if shows is None:
        return side
    hidden = {key for entry, keys in _SHOWS.items() if entry not in shows for key in keys}
    known = {key for keys in _SHOWS.values() for key in keys} | {"scores"}
    if "feedback" not in shows:
        hidden |= {key for key in side if key not in known}
    return {k: v for k, v in side.items() if k not in hidden}


class _BudgetStopper:
    """GEPA's stop callback: True once the budget is spent or reflection keeps failing."""

    def __init__(self, ctx: EngineContext, reflector: _Reflector) -> None:
        self.ctx = ctx
        self.reflector = reflector

    def __call__(self, gepa_state: Any) -> bool:
        return self.reflector.fatal is not None or self.ctx.should_stop()


class _Plateau:
    """Stops once the best val score has not improved for `patience` iterations (proposals)."""

    def __init__(self, ctx: EngineContext, patience: int, per_iteration: int = 1) -> None:
        self.ctx = ctx
        self.proposals = patience
        self.patience = max(1, -(-patience // per_iteration))  # in iterations
        self.best: float | None = None
        self.since = 0
        self.seen = 0

    def __call__(self, gepa_state: Any) -> bool:
        scores = list(getattr(gepa_state, "program_full_scores_val_set", []) or [])
        iteration = int(getattr(gepa_state, "i", 0) or 0)
        if scores and (self.best is None or max(scores) > self.best):
            self.best, self.since = max(scores), iteration
        if iteration - self.since >= self.patience and iteration != self.seen:
            self.seen = iteration
            self.ctx.log(
                f"auto: no better val score in {self.proposals} proposals (best "
                f"{self.best if self.best is not None else 0:.3f}); stopping early"
            )
            return True
        return False


class _Log:
    """GEPA's logger protocol, onto the run's engine log."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def log(self, message: str) -> None:
        self.ctx.engine_log(message)


def _unmeasured_choices(settings: EngineSettings, reflection: dict[str, Any]) -> list[str]:
    """What the user's own callables do, said when the run starts.

    Raises:
        ConfigError: the reflection model's kwargs come with a reflection callable, which
            Skynet cannot pass them to.
    """
    given = settings.reflection_temperature is not None or settings.reflection_max_tokens
    if settings.reflection_lm is not None and given:
        raise ConfigError(
            "[models] reflection_temperature / reflection_max_tokens apply to a reflection "
            "model Skynet calls; your reflection callable is called with the prompt alone: set "
            "them inside it, or drop them"
        )
    said = []
    if settings.reflection_lm is not None:
        said.append(
            f"reflection model: your callable {python_object_text(settings.reflection_lm)}: "
            "its calls are outside Skynet's models, not measured"
        )
    proposer = reflection.get("custom_candidate_proposer")
    if proposer is not None:
        said.append(
            f"proposals: written by your custom_candidate_proposer {python_object_text(proposer)}"
            ": their model calls are not measured"
        )
    return said


class GepaEngine:
    """`gepa.optimize_anything` over skynet's Evaluation."""

    name = "gepa"
    proposals_for = staticmethod(gepa_proposals)  # how many proposals a budget pays for

    def min_metric_calls(self, *, train: int, val: int, minibatch_size: int) -> int:
        # The seed on the whole val set, then one reflection step: parent and child on a minibatch.
        return val + 2 * min(minibatch_size, train)

    def choices(self, settings: EngineSettings) -> tuple[str, ...]:
        template = self._template(settings)
        options = gepa_options(settings.options)
        said = [template.reason]
        if settings.options:
            said.append(
                "gepa options: "
                + ", ".join(f"{k} = {recordable(v)!r}" for k, v in settings.options.items())
            )
        if options.merge is not None:
            said.append("merge on ([engine.options])")
        said += _unmeasured_choices(settings, options.reflection)
        return tuple(said)

    def _template(self, settings: EngineSettings) -> TemplateChoice:
        own = settings.reflection_lm
        return choose_template(
            settings.reflection_template,
            settings.reflection_model if own is None else python_object_text(own),
            kind=settings.artifact_kind,
            objective=settings.objective,
            background=settings.background,
        )

    def optimize(self, ctx: EngineContext) -> EngineOutcome:
        from gepa.optimize_anything import (
            EngineConfig,
            GEPAConfig,
            MergeConfig,
            ReflectionConfig,
            TrackingConfig,
            optimize_anything,
        )

        shows = ctx.settings.reflection_shows

        def evaluator(candidate: Candidate, example: Item) -> tuple[float, dict[str, Any]]:
            score, side = evaluated(ctx, candidate, example)
            return score, _shown(side, shows)

        settings = ctx.settings
        template = self._template(settings)
        options = gepa_options(settings.options)
        engine_options = dict(options.engine)
        gepa_objective = settings.objective if template.name == "gepa" else ""
        gepa_background = settings.background if template.name == "gepa" else ""
        max_tokens = settings.reflection_max_tokens or template.max_tokens
        reflector = _Reflector(
            ctx,
            template.text or _gepa_template(gepa_objective, gepa_background),
            max_tokens,
            settings.reflection_lm,
        )
        engine_options = fit_options(engine_options, ctx)
        per_iteration = _tasks_per_iteration(engine_options.get("sampling_strategy"))
        reflection_options: dict[str, Any] = {"reflection_lm": reflector, **options.reflection}
        if reflection_options.get("custom_candidate_proposer") is not None:
            reflection_options["custom_candidate_proposer"] = _RecordedProposer(
                ctx, reflection_options["custom_candidate_proposer"]
            )
        perfect = PerfectOnVal(ctx, options.reflection.get("perfect_score"))
        if template.text is not None:
            reflection_options["reflection_prompt_template"] = template.text
        config = GEPAConfig(
            engine=EngineConfig(
                seed=ctx.seed,
                max_metric_calls=ctx.max_metric_calls,
                parallel=ctx.concurrency > 1,
                max_workers=ctx.concurrency,
                raise_on_exception=True,
                track_best_outputs=False,
                display_progress_bar=False,
                capture_stdio=False,
                **engine_options,
            ),
            reflection=ReflectionConfig(
                reflection_minibatch_size=min(ctx.minibatch_size, len(ctx.train)),
                **reflection_options,
            ),
            tracking=TrackingConfig(logger=_Log(ctx)),
            merge=MergeConfig(**options.merge) if options.merge is not None else None,
            callbacks=[cast(Any, Verdicts(ctx))],  # gepa calls the methods a callback has
            stop_callbacks=[
                _BudgetStopper(ctx, reflector),
                perfect,
                *([_Plateau(ctx, ctx.patience, per_iteration)] if ctx.patience else []),
            ],
        )
        result = optimize_anything(
            seed_candidate=dict(ctx.seed_candidate),
            evaluator=evaluator,
            dataset=list(ctx.train),
            valset=list(ctx.val),
            objective=gepa_objective or None,
            background=gepa_background or None,
            config=config,
        )
        if reflector.fatal is not None:
            raise reflector.fatal
        candidates = [dict(c) for c in result.candidates]
        return EngineOutcome(
            best_candidate=dict(result.best_candidate),  # type: ignore[arg-type]
            candidates=candidates,
            parents=[list(p) for p in result.parents],
            val_scores=[float(s) for s in result.val_aggregate_scores],
            metric_calls=int(result.total_metric_calls or 0),
            stopped_by=perfect.said,
        )
