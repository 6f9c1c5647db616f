"""A code artifact optimized end to end: candidates run sandboxed, their crashes reach the
reflection model as feedback, and the reward trades accuracy against measured speed."""

from __future__ import annotations

import textwrap
from collections import Counter

import pytest
from projects import make_sum_code_project

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import reply

pytestmark = pytest.mark.slow

SEED = textwrap.dedent(
    """
    def run(input):
        n = input["n"]
        if n > 6:
            return {"total": 1 // 0}  # breaks on large inputs
        return {"total": sum(range(n + 1))}
    """
)
FIXED = "def run(input):\n    n = input['n']\n    return {'total': n * (n + 1) // 2}\n"


def make_code_project(root, server_url):
    return make_sum_code_project(
        root,
        code=SEED,
        metric="""
        from skynet import reward

        REWARD_SPEC = {"weights": {"accuracy": 0.8, "speed": 0.2, "cost": 0},
                       "speed": {"reference": 2000}}

        def score(input, output, expected=None):
            right = isinstance(output, dict) and output.get("total") == expected["total"]
            return reward(REWARD_SPEC, float(right), "right" if right else f"want {expected['total']}")
        """,
        toml=f"""
        timeout_s = 5

        [engine]
        name = "auto"
        concurrency = 2

        [budget]
        max_metric_calls = 30

        [models]
        reflection = "openai/skynet-test"

        [models.endpoints."openai/skynet-test"]
        api_base = "{server_url}"
        """,
    )


def test_a_code_artifact_is_optimized_and_its_crashes_are_feedback(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = lambda body: reply(f"```python\n{FIXED}```")
    project = make_code_project(tmp_path / "p", scripted_server.url)
    with open(project / "metric.py", "a") as f:
        f.write("\n\ndef key(expected):\n    return {'total': expected['total']}\n")
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr()
    assert "auto: engine gepa-async for a code artifact" in out.err
    best = next((project / ".skynet" / "runs").glob("*/best_code.py")).read_text()
    assert best.strip() == FIXED.strip()
    reflection_prompt = scripted_server.requests[0]["messages"][-1]["content"]
    # gepa's own template for a model that is not an embedded one, the program inside it.
    assert reflection_prompt.startswith("I am optimizing a parameter in my system.")
    assert 'def run(input):\n    n = input["n"]' in reflection_prompt
    assert "ZeroDivisionError" in reflection_prompt  # the crash's stderr reached reflection
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        evaluations = store.evaluations(run.id)
        kinds = Counter(e.error_kind for e in evaluations if e.error_kind is not None)
        speed = next(e.scores.get("speed") for e in evaluations if e.score is not None)
    assert kinds.get("candidate", 0) >= 1  # the seed's crashes are item errors, not scores
    assert 0 < speed < 1  # the measured time of the sandboxed run fed the reward


def test_a_dollar_budget_stops_a_code_run_on_reflection_spend(tmp_path, scripted_server):
    # Code candidates cost nothing to run; the reflection model's calls are what the budget sees.
    scripted_server.responder = lambda body: reply(
        f"```python\n{SEED}```", prompt_tokens=1000, completion_tokens=0
    )
    project = make_code_project(tmp_path / "p", scripted_server.url)
    with open(project / "metric.py", "a") as f:
        f.write("\n\ndef key(expected):\n    return {'total': expected['total']}\n")
    toml = project / "skynet.toml"
    toml.write_text(
        toml.read_text().replace("max_metric_calls = 30", "max_metric_calls = 500")
        + '\n[models.prices."openai/skynet-test"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\n'
    )
    assert main(["-C", str(project), "run", "--max-cost-usd", "0.012"]) == 0
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        spent = sum(c.cost_usd or 0.0 for c in store.calls(run.id) if not c.cached)
        evaluations = len(store.evaluations(run.id))
    assert evaluations < 500
    # Each reflection call reserves its worst case first (~$0.005: its counted prompt and 4,096
    # output tokens, gepa's template sends no max_tokens of its own) and costs $0.001; the run
    # stops when the next one could pass the budget, never after. Input is reserved at its byte
    # bound (no tokenizer can count more), so the run may stop a few calls earlier.
    assert 0.002 < spent <= 0.012, spent
