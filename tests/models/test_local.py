"""The embedded default model, for real: SmolLM2-135M-Instruct through llama-cpp-python and litellm."""

from __future__ import annotations

import pytest

import skynet
from skynet import Item
from skynet.contract import Metric
from skynet.models import EMBEDDED_MODEL, Models, ModelsConfig, using

pytestmark = pytest.mark.embedded


def test_the_embedded_model_answers_through_the_common_path(tmp_path):
    models = Models(ModelsConfig(cache_path=tmp_path / "cache.db"))
    assert models.config.task == models.config.reflection == EMBEDDED_MODEL
    messages = [{"role": "user", "content": "What is the capital of Japan?"}]
    got = models.complete("task", messages, max_tokens=24)
    assert "Tokyo" in got.text
    assert got.input_tokens > 0 and got.output_tokens > 0
    assert got.cost_usd == 0.0  # declared price 0: measured, not unknown
    assert got.elapsed_ms > 0 and not got.cached
    again = models.complete("task", messages, max_tokens=24)
    assert again.cached and again.text == got.text and again.elapsed_ms == got.elapsed_ms


def test_the_embedded_model_is_metered_and_serves_llm(tmp_path):
    models = Models(ModelsConfig(cache_path=tmp_path / "cache.db"))

    def run(candidate, inp):
        return models.complete(
            "task",
            [{"role": "system", "content": candidate}, {"role": "user", "content": inp["q"]}],
            max_tokens=24,
        ).text

    def score(input, output, expected=None):
        verdict = skynet.llm("Reply with one word: yes or no.", input=output, max_tokens=4)
        right = expected["city"] in output
        return float(right), {"feedback": f"judge said {verdict!r}"}

    with using(models):
        result = skynet.Evaluation(Metric(score), run)(
            "Answer with the city name.",
            Item("jp", {"q": "What is the capital of Japan?"}, {"city": "Tokyo"}),
        )
    assert result.ok, result.error
    obs = result.observation
    assert obs.model_calls == 1 and obs.input_tokens > 0 and obs.cost_usd == 0.0
    assert obs.elapsed_ms > 0
    assert models.ledgers["metric"].totals().calls == 1
    assert models.ledgers["task"].totals().calls == 1
