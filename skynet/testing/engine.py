"""An EngineContext without a run, for testing an engine (a plugin's, or one of Skynet's) in a
unit test: no project, no run store, no models, no threads of Skynet's.

    from skynet.testing import engine_context

    ctx = engine_context(
        {"instructions": "Say hi."},
        train=[Item(id="a", input={"q": "hi"}, expected={"a": "hello"})],
        score=lambda candidate, item: (1.0 if "hello" in candidate["instructions"] else 0.0, ""),
        reflect=lambda prompt, draw, max_tokens: "```\nSay hello.\n```",
        max_metric_calls=20,
    )
    outcome = MyEngine().optimize(ctx)
    assert ctx.recorded.proposals  # what the engine recorded, as a run would have

It is a real EngineContext (the dataclass the session builds): the engine sees the same
interface; only what stands behind it is small. `evaluate` scores with `score` and keeps every
Result; a (candidate, item) scored before is served again, not scored twice, as a run's replay
serves it; `should_stop` turns True once `max_metric_calls` evaluations were scored.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skynet.data import Item
from skynet.engine import Candidate, EngineContext, EngineSettings
from skynet.evaluation import Result

__all__ = ["Recorded", "engine_context"]


@dataclass
class Recorded:
    """What an engine recorded through its context, in order."""

    results: list[tuple[Candidate, Result]] = field(default_factory=list)
    proposals: list[dict[str, Any]] = field(default_factory=list)
    lineage: list[tuple[Candidate, list[Candidate]]] = field(default_factory=list)
    reflections: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)

    @property
    def metric_calls(self) -> int:
        return len(self.results)


def engine_context(
    seed_candidate: Candidate,
    /,
    *,
    train: Sequence[Item],
    val: Sequence[Item] | None = None,
    score: Callable[[Candidate, Item], tuple[float, str]],
    reflect: Callable[[str, int, int | None], str],
    max_metric_calls: int | None = None,
    settings: EngineSettings | None = None,
    **fields: Any,
) -> Any:
    """A real EngineContext over `score` and `reflect`, with `recorded` (a Recorded) on it.

    Args:
        seed_candidate: the starting candidate, by component name (positional: `seed=` is
            the engine's random seed, an EngineContext field).
        train, val: the items (val: the train items when not given, as valset=None).
        score: (candidate, item) -> (score, feedback): the metric on the candidate's output;
            an exception is recorded as the item's error, never raised to the engine.
        reflect: (prompt, draw, max_tokens) -> reply text: the reflection model.
        max_metric_calls: the budget; `should_stop` is True once it is spent (None: never).
        settings: the engine's settings (options, reflection template, concurrency).
        **fields: any other EngineContext field (seed, minibatch_size, patience, ...).
    """
    recorded = Recorded()
    lock = threading.Lock()
    scored: dict[str, Result] = {}

    def evaluate(candidate: Candidate, item: Item) -> Result:
        key = json.dumps([candidate, item.id], sort_keys=True)
        with lock:
            if key in scored:
                return scored[key]  # replayed, as a run serves what it recorded
        try:
            value, feedback = score(dict(candidate), item)
            result = Result(item_id=item.id, output=None, score=float(value), feedback=feedback)
        except Exception as exc:  # noqa: BLE001 — one item's failure is a Result, as in a run
            result = Result(
                item_id=item.id,
                error=f"{type(exc).__name__}: {exc}",
                error_kind="metric_error",
                error_type=type(exc).__name__,
            )
        with lock:
            scored[key] = result
            recorded.results.append((dict(candidate), result))
        return result

    def reflected(prompt: str, draw: int, max_tokens: int | None) -> str:
        with lock:
            recorded.reflections.append(prompt)
        return reflect(prompt, draw, max_tokens)

    def record_proposal(
        *, status: str, detail: str, text: str = "", parent: Candidate | None = None
    ) -> None:
        with lock:
            recorded.proposals.append(
                {"status": status, "detail": detail, "text": text, "parent": parent}
            )

    def record_lineage(candidate: Candidate, parents: Sequence[Candidate]) -> None:
        with lock:
            recorded.lineage.append((dict(candidate), [dict(p) for p in parents]))

    def should_stop() -> bool:
        return max_metric_calls is not None and recorded.metric_calls >= max_metric_calls

    ctx = EngineContext(
        seed_candidate=dict(seed_candidate),
        train=list(train),
        val=list(train if val is None else val),
        evaluate=evaluate,
        reflect=reflected,
        record_proposal=record_proposal,
        record_lineage=record_lineage,
        should_stop=should_stop,
        max_metric_calls=max_metric_calls,
        settings=settings or EngineSettings(),
        log=recorded.log.append,
        **fields,
    )
    object.__setattr__(ctx, "recorded", recorded)  # frozen: set once, as the context is made
    return ctx
