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
a note (skynet.side_info). A call the money budget refuses stops the run: an evaluation it refused
is handed to GEPA as a failed example (never recorded; GEPA stops at its next check, and the run
takes its best from the records), a refused reflection keeps the parent.

GEPA's own log lines go to ctx.engine_log (the run folder's gepa.log), not to the terminal.
"""

from __future__ import annotations

import re
from typing import Any

from skynet.data import Item
from skynet.engine import Candidate, EngineContext, EngineOutcome
from skynet.errors import BudgetExhausted, ModelError
from skynet.side_info import cut_side_info

__all__ = ["GepaEngine", "REFLECTION_TEMPLATE", "CODE_REFLECTION_TEMPLATE", "reflection_template"]

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


_CURRENT = re.compile(r"Current (?:instruction|program):\n```\n(.*?)\n```\n\nHow the ", re.S)
_DRAWS = 3
_FAILURES_BEFORE_STOP = 3


def _extract(reply: str) -> str:
    from gepa.strategies.instruction_proposal import InstructionProposalSignature

    return InstructionProposalSignature.output_extractor(reply)["new_instruction"]


class _Reflector:
    """GEPA's LanguageModel: prompt in, reply out, with failed proposals recorded and redrawn."""

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.total_cost = 0.0  # GEPA reads this; skynet keeps the real ledger
        self.failures_in_a_row = 0
        self.fatal: ModelError | None = None

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        text = (
            prompt
            if isinstance(prompt, str)
            else "\n\n".join(str(m.get("content", "")) for m in prompt)
        )
        found = _CURRENT.search(text)
        current = found.group(1).strip() if found else ""
        for draw in range(_DRAWS):
            try:
                reply = self.ctx.reflect(text, draw)
            except BudgetExhausted as exc:
                self.ctx.record_proposal(status="failed", detail=f"draw {draw}: {exc}")
                return f"```\n{current}\n```"  # the run stops at GEPA's next check
            except ModelError as exc:
                self.ctx.record_proposal(status="failed", detail=f"draw {draw}: {exc}")
                self.failures_in_a_row += 1
                if self.failures_in_a_row >= _FAILURES_BEFORE_STOP:
                    self.fatal = exc
                    break
                continue
            self.failures_in_a_row = 0
            proposal = _extract(reply).strip()
            if not proposal:
                self.ctx.record_proposal(
                    status="empty", detail=f"draw {draw}: the reply held no new text", text=reply
                )
            elif proposal == current:
                self.ctx.record_proposal(
                    status="unchanged",
                    detail=f"draw {draw}: the reply repeated the text",
                    text=reply,
                )
            else:
                self.ctx.record_proposal(status="proposed", detail=f"draw {draw}", text=proposal)
                return f"```\n{proposal}\n```"
        self.ctx.log(f"reflection gave no usable proposal in {_DRAWS} draws; keeping the parent")
        return f"```\n{current}\n```"


class _BudgetStopper:
    """GEPA's stop callback: True once the budget is spent or reflection keeps failing."""

    def __init__(self, ctx: EngineContext, reflector: _Reflector) -> None:
        self.ctx = ctx
        self.reflector = reflector

    def __call__(self, gepa_state: Any) -> bool:
        return self.reflector.fatal is not None or self.ctx.should_stop()


class _Plateau:
    """Stops once the best val score has not improved for `patience` iterations (proposals)."""

    def __init__(self, ctx: EngineContext, patience: int) -> None:
        self.ctx = ctx
        self.patience = patience
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
                f"auto: no better val score in {self.patience} proposals (best "
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


class GepaEngine:
    """`gepa.optimize_anything` over skynet's Evaluation."""

    name = "gepa"

    def min_metric_calls(self, *, train: int, val: int, minibatch_size: int) -> int:
        # The seed on the whole val set, then one reflection step: parent and child on a minibatch.
        return val + 2 * min(minibatch_size, train)

    def optimize(self, ctx: EngineContext) -> EngineOutcome:
        from gepa.optimize_anything import (
            EngineConfig,
            GEPAConfig,
            ReflectionConfig,
            TrackingConfig,
            optimize_anything,
        )

        limit = ctx.max_side_info_chars

        def evaluator(candidate: Candidate, example: Item) -> tuple[float, dict[str, Any]]:
            side: dict[str, Any] = {"Input": example.input, "Expected": example.expected}
            try:
                result = ctx.evaluate(dict(candidate), example)
            except BudgetExhausted as exc:
                # Not evaluated, not recorded; GEPA's next stop check ends the run.
                side["Error"] = f"not evaluated: {exc}"
                return 0.0, cut_side_info(side, limit)
            if result.ok:
                side["Output"] = result.output
                side["Feedback"] = result.feedback
                if result.scores:
                    side["scores"] = dict(result.scores)
                side.update({k: v for k, v in result.extra.items() if k not in side})
                return float(result.score or 0.0), cut_side_info(side, limit)
            # An error is not a wrong answer; GEPA needs a number, the records keep the error.
            side["Error"] = result.error
            side["Feedback"] = f"This example failed with an error: {result.error}"
            return 0.0, cut_side_info(side, limit)

        reflector = _Reflector(ctx)
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
                frontier_type=ctx.frontier,  # type: ignore[arg-type]  # "instance" | "hybrid"
            ),
            reflection=ReflectionConfig(
                reflection_lm=reflector,
                reflection_minibatch_size=min(ctx.minibatch_size, len(ctx.train)),
                reflection_prompt_template=reflection_template(
                    ctx.objective, ctx.background, ctx.artifact_kind
                ),
            ),
            tracking=TrackingConfig(logger=_Log(ctx)),
            stop_callbacks=[
                _BudgetStopper(ctx, reflector),
                *([_Plateau(ctx, ctx.patience)] if ctx.patience else []),
            ],
        )
        result = optimize_anything(
            seed_candidate=dict(ctx.seed_candidate),
            evaluator=evaluator,
            dataset=list(ctx.train),
            valset=list(ctx.val),
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
        )
