"""skynet.testing.engine_context: an engine runs on a real EngineContext with no run behind it,
so an engine (a plugin's) is tested in a unit test. Shown on Skynet's own gepa engine, whose
search the identity tests compare with raw gepa's."""

from __future__ import annotations

from engines.gepa import GepaEngine
from skynet.data import Item
from skynet.engine import EngineSettings
from skynet.testing import engine_context

ITEMS = [Item(id=f"i{n}", input={"n": n}, expected={"answer": str(2 * n)}) for n in range(6)]


def score(candidate, item):
    """Right when the instructions say to double: the feedback says what is missing."""
    if "double" in candidate["instructions"].lower():
        return 1.0, "right"
    return 0.0, f"expected {item.expected['answer']}: the answer is twice n"


def reflect(prompt, draw, max_tokens):
    return "```\nDouble n and give the number.\n```"


def test_the_gepa_engine_finds_the_better_instruction_on_a_context_without_a_run():
    ctx = engine_context(
        {"instructions": "Give a number."},
        train=ITEMS,
        score=score,
        reflect=reflect,
        max_metric_calls=30,
        settings=EngineSettings(concurrency=2),
        minibatch_size=2,
        seed=0,  # the engine's seed: the starting candidate is the first argument
    )
    outcome = GepaEngine().optimize(ctx)
    assert outcome.best_candidate == {"instructions": "Double n and give the number."}
    assert outcome.val_scores[0] == 0.0 and max(outcome.val_scores) == 1.0
    recorded = ctx.recorded
    assert recorded.reflections and "twice n" in recorded.reflections[0]  # feedback reached it
    assert recorded.metric_calls <= 30
    # Each (candidate, item) scored once: the engine's repeats were served, not scored again.
    keys = [(c["instructions"], r.item_id) for c, r in recorded.results]
    assert len(keys) == len(set(keys))


def test_a_metric_that_raises_is_the_items_error_never_the_engines():
    def broken(candidate, item):
        if item.id == "i0":
            raise ValueError("no answer")
        return score(candidate, item)

    ctx = engine_context(
        {"instructions": "Give a number."}, train=ITEMS, score=broken, reflect=reflect
    )
    result = ctx.evaluate({"instructions": "Give a number."}, ITEMS[0])
    assert not result.ok and result.error == "ValueError: no answer" and result.score is None
    assert ctx.should_stop() is False  # no budget: never
