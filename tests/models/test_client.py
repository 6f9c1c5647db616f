"""Model calls through litellm against the loopback scripted server: figures, retries, cache,
governor, ledgers, and the meter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import skynet
from skynet import ConfigError, Item, ModelError
from skynet.contract import Metric
from skynet.models import Models, ModelsConfig, using
from skynet.testing import MODEL, fail, hang, reply

USER = [{"role": "user", "content": "What is the capital of France ?"}]  # 7 words


def test_a_call_reports_time_tokens_and_cost_from_the_declared_price(scripted_server):
    scripted_server.script(
        reply("Paris it is", latency_s=0.2, prompt_tokens=1000, completion_tokens=500)
    )
    models = scripted_server.models(input_per_mtok=3.0, output_per_mtok=15.0)
    got = models.complete("task", USER)
    assert got.text == "Paris it is"
    assert (got.input_tokens, got.output_tokens) == (1000, 500)
    assert got.cost_usd == pytest.approx((1000 * 3.0 + 500 * 15.0) / 1e6)
    assert 200 <= got.elapsed_ms < 2000
    assert not got.cached
    assert scripted_server.requests[0]["messages"] == USER


def test_an_unknown_price_is_none_with_a_note_never_zero(scripted_server):
    models = scripted_server.models(input_per_mtok=None, output_per_mtok=None)
    got = models.complete("task", USER)
    assert got.cost_usd is None
    assert "no known price" in got.cost_note
    assert models.ledgers["task"].totals().unpriced_calls == 1


def test_price_comes_from_litellms_offline_table():
    models = Models(ModelsConfig(cache_path=None))
    price = models.price("openai/gpt-4o-mini")
    assert price is not None and price.input_per_mtok > 0 and price.output_per_mtok > 0
    assert models.price("openai/no-such-model-anywhere") is None
    assert models.price("local/smollm2").cost(10**6, 10**6) == 0.0


@pytest.mark.slow
def test_retries_on_429_honour_retry_after_then_succeed(scripted_server):
    scripted_server.script(fail(429, retry_after=0.3), fail(500), fail(503), reply("ok"))
    models = scripted_server.models()
    began = time.monotonic()
    got = models.complete("task", USER)
    assert got.text == "ok" and got.attempts == 4
    assert time.monotonic() - began >= 0.3  # the Retry-After was waited out
    assert scripted_server.request_count == 4


def test_retries_run_out_into_a_model_error_naming_model_and_cause(scripted_server):
    scripted_server.script(*[fail(500)] * 3)
    models = scripted_server.models(max_attempts=3)
    with pytest.raises(ModelError) as caught:
        models.complete("task", USER)
    err = caught.value
    assert err.model == MODEL and err.attempts == 3
    assert MODEL in str(err) and "3 attempt(s)" in str(err) and "500" in str(err)
    totals = models.ledgers["task"].totals()
    assert totals.failed_calls == 1 and totals.calls == 1


def test_a_client_error_is_not_retried(scripted_server):
    scripted_server.script(fail(400), reply("never reached"))
    models = scripted_server.models()
    with pytest.raises(ModelError, match="not retried"):
        models.complete("task", USER)
    assert scripted_server.request_count == 1


@pytest.mark.slow
def test_a_hung_server_times_out_and_is_retried(scripted_server):
    scripted_server.script(hang(5), reply("back"))
    models = scripted_server.models(timeout_s=0.5)
    got = models.complete("task", USER)
    assert got.text == "back" and got.attempts == 2


def test_a_cache_hit_returns_the_first_calls_figures_without_a_request(scripted_server, tmp_path):
    scripted_server.script(reply("Paris", latency_s=0.25, prompt_tokens=40, completion_tokens=2))
    first = scripted_server.models(tmp_path).complete("task", USER)
    # A new session on the same cache file: nothing is paid twice across runs.
    again = scripted_server.models(tmp_path).complete("task", USER)
    assert scripted_server.request_count == 1
    assert again.cached and not first.cached
    assert again.text == first.text
    assert (again.input_tokens, again.output_tokens, again.cost_usd) == (
        first.input_tokens,
        first.output_tokens,
        first.cost_usd,
    )
    assert again.elapsed_ms == pytest.approx(first.elapsed_ms)


@pytest.mark.slow
def test_identical_requests_in_flight_at_once_make_one_call(scripted_server):
    # Two threads miss the cache with the same request at the same moment (GEPA can put one item
    # twice in a minibatch): one request reaches the server, the other thread reads its reply.
    scripted_server.responder = lambda body: reply("Paris", latency_s=0.5)
    models = scripted_server.models()
    start = threading.Barrier(3)
    got = []

    def call():
        start.wait()
        got.append(models.complete("task", USER))

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(scripted_server.requests) == 1
    assert sorted(r.cached for r in got) == [False, True, True]
    assert {r.text for r in got} == {"Paris"}


def test_the_draw_index_and_parameters_are_part_of_the_cache_key(scripted_server, tmp_path):
    models = scripted_server.models(tmp_path)
    models.complete("task", USER)
    models.complete("task", USER, draw=1)
    models.complete("task", USER, temperature=0.7)
    models.complete("task", USER)
    assert scripted_server.request_count == 3


@pytest.mark.slow
def test_the_governor_caps_concurrent_calls(scripted_server):
    scripted_server.default = reply("ok", latency_s=0.15)
    models = scripted_server.models(max_concurrent=2)
    threads = [
        threading.Thread(
            target=models.complete, args=("task", [{"role": "user", "content": f"q{i}"}])
        )
        for i in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gov = models.governor(MODEL)
    assert gov.peak_in_flight == 2
    assert models.ledgers["task"].totals().calls == 6


def test_the_governor_spaces_requests_to_the_rate_limit(scripted_server):
    models = scripted_server.models(rpm=600)  # one start every 0.1 s
    began = time.monotonic()
    for i in range(4):
        models.complete("task", [{"role": "user", "content": f"q{i}"}])
    assert time.monotonic() - began >= 0.3


# -- the meter sees task calls, and only task calls ---------------------------------------------


def _capital_metric(input, output, expected=None):
    obs = skynet.observation()
    right = expected["city"] in output
    return float(right), {
        "feedback": "",
        "scores": {"cost": skynet.service_cost() or 0.0, "ms": obs.elapsed_ms},
    }


def test_two_items_evaluated_concurrently_keep_separate_observations(scripted_server):
    def respond(body):
        text = body["messages"][-1]["content"]
        if "slow" in text:
            return reply("Lima", latency_s=0.4, prompt_tokens=100, completion_tokens=10)
        return reply("Paris", latency_s=0.05, prompt_tokens=10, completion_tokens=1)

    scripted_server.responder = respond
    models = scripted_server.models(input_per_mtok=1.0, output_per_mtok=1.0)

    def run(candidate, inp):
        return models.complete("task", [{"role": "user", "content": inp["q"]}]).text

    evaluation = skynet.Evaluation(Metric(_capital_metric), run)
    items = [
        Item("slow", {"q": "slow Peru"}, {"city": "Lima"}),
        Item("fast", {"q": "fast France"}, {"city": "Paris"}),
    ]
    results = {}
    threads = [
        threading.Thread(target=lambda it=it: results.__setitem__(it.id, evaluation("c", it)))
        for it in items
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    slow, fast = results["slow"].observation, results["fast"].observation
    assert (slow.input_tokens, slow.output_tokens) == (100, 10)
    assert (fast.input_tokens, fast.output_tokens) == (10, 1)
    assert slow.cost_usd == pytest.approx(110 / 1e6) and fast.cost_usd == pytest.approx(11 / 1e6)
    assert slow.elapsed_ms >= 400 and fast.elapsed_ms < 400
    assert results["slow"].scores["cost"] == pytest.approx(110 / 1e6)


def test_judge_calls_never_appear_in_service_cost(scripted_server):
    def respond(body):
        if body["model"] == "skynet-judge":
            return reply("PASS", prompt_tokens=5000, completion_tokens=5000)
        return reply("Paris", prompt_tokens=10, completion_tokens=10)

    scripted_server.responder = respond
    models = scripted_server.models(metric_model="openai/skynet-judge")
    seen = {}

    def score(input, output, expected=None):
        verdict = skynet.llm("Answer PASS if the reply names the city.", input=output)
        seen["cost"] = skynet.service_cost()
        return float(verdict == "PASS"), {"feedback": verdict}

    def run(candidate, inp):
        return models.complete("task", [{"role": "user", "content": inp["q"]}]).text

    with using(models):
        result = skynet.Evaluation(Metric(score), run)(
            "c", Item("i", {"q": "France?"}, {"city": "Paris"})
        )
    assert result.ok and result.score == 1.0
    task_cost = 20 * 1.5 / 1e6  # 10 in at $1/M + 10 out at $2/M
    assert seen["cost"] == pytest.approx(task_cost)
    assert result.observation.cost_usd == pytest.approx(task_cost)
    judge = models.ledgers["metric"].totals()
    assert judge.calls == 1 and judge.cost_usd == pytest.approx(15000 / 1e6)
    assert models.ledgers["task"].totals().calls == 1


def test_a_task_model_failure_is_an_item_error_not_a_score(scripted_server):
    scripted_server.script(fail(500), fail(500))
    models = scripted_server.models(max_attempts=2)

    def run(candidate, inp):
        return models.complete("task", [{"role": "user", "content": "q"}]).text

    result = skynet.Evaluation(Metric(_capital_metric), run)("c", Item("i7", {}, {"city": "x"}))
    assert result.error_kind == "task" and result.score is None
    assert "i7" in result.error and MODEL in result.error


# -- llm() -------------------------------------------------------------------------------------


def test_llm_is_cached_one_call_one_verdict(scripted_server):
    scripted_server.script(reply("PASS"), reply("FAIL"))
    models = scripted_server.models()
    with using(models):
        first = skynet.llm("Grade it.", input={"output": "Paris"})
        second = skynet.llm("Grade it.", input={"output": "Paris"})
        redraw = skynet.llm("Grade it.", input={"output": "Paris"}, draw=1)
    assert (first, second, redraw) == ("PASS", "PASS", "FAIL")
    assert scripted_server.request_count == 2
    assert models.ledgers["metric"].totals().calls == 3
    assert models.ledgers["metric"].totals().cached_calls == 1


def test_llm_uses_the_reflection_model_when_no_metric_model_is_set(scripted_server):
    models = scripted_server.models()
    assert models.config.metric == ""
    with using(models):
        skynet.llm("Grade it.", input="x")
    assert scripted_server.requests[0]["model"] == "skynet-test"


def test_llm_with_no_model_configured_says_how_to_configure():
    with pytest.raises(ConfigError, match="SKYNET_METRIC_MODEL"):
        skynet.llm("Grade it.", input="x")


@pytest.mark.slow
def test_llm_from_a_plain_script_with_skynet_metric_model(scripted_server, tmp_path):
    scripted_server.script(reply("PASS"))
    script = tmp_path / "judge.py"
    script.write_text(
        textwrap.dedent(
            """
        import skynet
        print(skynet.llm("Say PASS.", input="anything"))
        """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(
        SKYNET_METRIC_MODEL=MODEL,
        OPENAI_API_BASE=scripted_server.url,
        OPENAI_API_KEY="sk-loopback",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "PASS"
    assert scripted_server.request_count == 1
    assert (tmp_path / ".skynet" / "cache.db").exists()
