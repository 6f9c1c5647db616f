"""dspy.GEPA's `reflection_lm=dspy.LM(...)`, as DSPy's tutorials write it, given to Skynet as
`models={"reflection": dspy.LM(...)}` (issue 28): the LM's model is the reflection model, its
temperature and max_tokens the reflection ones (models= wins), its api_base and key reach the
server and are never recorded, as a program's own LMs are."""

from __future__ import annotations

import dspy
import pytest
from artifacts.test_dspy_runs import responder
from test_dspy_metrics import aime_optimize

from skynet.runs import RunStore

KEY = "sk-reflection-8c2d"


def _run(tmp_path, server, reflection, engine: str, **models):
    server.responder = responder
    result = aime_optimize(
        tmp_path,
        models={
            "task": "openai/skynet-test",
            "reflection": reflection,
            "endpoints": {"openai/skynet-test": {"api_base": server.url}},
            **models,
        },
        engine={"name": engine},
        budget={"max_metric_calls": 20},
    )
    with RunStore(result.store / "runs.db", readonly=True) as store:
        recorded = store.get_run(result.run_id).config["models"]
        calls = store.calls(result.run_id)
    asked = [
        (body, headers)
        for body, headers in zip(server.requests, server.request_headers, strict=True)
        if body.get("model") == "reflection-model"
    ]
    return result, recorded, calls, asked


@pytest.mark.parametrize("engine", ["gepa", "dspy-gepa"])
def test_a_reflection_dspy_lm_is_reached_as_it_says_and_its_key_not_recorded(
    tmp_path, scripted_server, engine
):
    lm = dspy.LM(
        "openai/reflection-model",
        api_base=scripted_server.url,
        api_key=KEY,
        temperature=1.0,
        max_tokens=3200,
        cache=False,
    )
    result, recorded, calls, asked = _run(tmp_path, scripted_server, lm, engine)
    assert result.best_score == 1.0  # the reflection model's proposal was used
    assert asked and {h.get("authorization") for _, h in asked} == {f"Bearer {KEY}"}
    assert {(b["temperature"], b["max_tokens"]) for b, _ in asked} == {(1.0, 3200)}
    assert recorded["reflection"] == "openai/reflection-model"
    assert (recorded["reflection_temperature"], recorded["reflection_max_tokens"]) == (1.0, 3200)
    # Its calls are measured, under the reflection role, as any reflection model's.
    assert any(c.role == "reflection" and c.measured for c in calls)
    stored = [p for p in (tmp_path / "s").rglob("*") if p.is_file()]
    assert not [p for p in stored if KEY.encode() in p.read_bytes()]


def test_models_given_win_over_the_reflection_lms_settings(tmp_path, scripted_server):
    lm = dspy.LM(
        "openai/reflection-model", api_base=scripted_server.url, temperature=1.0, cache=False
    )
    _, recorded, _, asked = _run(tmp_path, scripted_server, lm, "gepa", reflection_temperature=0.3)
    assert {b["temperature"] for b, _ in asked} == {0.3}
    assert recorded["reflection_temperature"] == 0.3
