"""Budget reservations against the loopback server: a call whose worst case would pass
max_cost_usd is never sent; reservations become real costs or are released; concurrent calls
cannot jointly pass the limit; an unpriced model under a money budget is refused; a paid call is
in the ledger whatever happens to the cache write."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from skynet import BudgetExhausted, ConfigError, ModelError
from skynet.models import Models, ModelsConfig, ModelSettings, Price
from skynet.models.budget import (
    DEFAULT_MAX_TOKENS,
    Budget,
    count_input_tokens,
    input_token_bound,
)
from skynet.testing import MODEL, fail, reply

USER = [{"role": "user", "content": "What is the capital of France ?"}]
IN, OUT = 1.0, 2.0  # USD per million tokens: the declared price and what the server bills


def _litellm_tokens(messages):
    from skynet.models._litellm import litellm

    return litellm.token_counter(model=MODEL, messages=messages)


def _worst(messages, max_tokens):
    # Input at the larger of litellm's count and the UTF-8 bound (here the bound).
    tokens = max(_litellm_tokens(messages), input_token_bound(messages))
    return (tokens * IN + max_tokens * OUT) / 1e6


# -- the budget itself ----------------------------------------------------------------------
def test_a_reservation_past_the_limit_is_refused_and_settling_keeps_the_real_cost():
    budget = Budget(1.0)
    first = budget.reserve(0.6, role="task", model="m")
    with pytest.raises(BudgetExhausted) as refused:
        budget.reserve(0.5, role="reflection", model="r")  # 0.6 held + 0.5 > 1.0
    assert refused.value.needed_usd == 0.5 and refused.value.reserved_usd == 0.6
    assert budget.refusal is refused.value
    budget.settle(first, 0.1)  # the reply cost less than its worst case
    assert budget.spent_usd == pytest.approx(0.1) and budget.reserved_usd == 0
    second = budget.reserve(0.9, role="task", model="m")  # 0.1 + 0.9 = 1.0 fits exactly
    budget.release(second)  # the call failed: nothing spent
    assert budget.spent_usd == pytest.approx(0.1) and budget.reserved_usd == 0
    budget.settle(second, 5.0)  # settling a released reservation changes nothing
    assert budget.spent_usd == pytest.approx(0.1)


@pytest.mark.slow
def test_tokens_are_counted_by_litellm():
    text = "naïve café " * 50
    counted, by_litellm = count_input_tokens(MODEL, [{"role": "user", "content": text}])
    assert by_litellm and counted == _litellm_tokens([{"role": "user", "content": text}])
    assert 0 < counted < len(text)


@pytest.mark.parametrize(
    "content",
    [
        [{"type": "no-such-part", "text": "x" * 5000}],  # litellm's counter raises
        {"text": "x" * 5000},  # litellm's counter would count it as nothing
    ],
)
def test_what_litellm_cannot_count_is_bounded_by_its_utf8_size(content):
    bound, by_litellm = count_input_tokens(MODEL, [{"role": "user", "content": content}])
    assert not by_litellm and bound >= 5000


# -- calls on loopback ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_call_that_would_pass_the_budget_is_not_sent(scripted_server):
    big = [{"role": "user", "content": "word " * 200_000}]  # ~200k tokens: $0.20 of input
    models = scripted_server.models(input_per_mtok=IN, output_per_mtok=OUT, max_cost_usd=0.10)
    with pytest.raises(BudgetExhausted, match=r"max_cost_usd = \$0.1 reached: the task call"):
        models.complete("task", big, max_tokens=16)
    assert scripted_server.request_count == 0  # never sent
    assert models.ledgers["task"].totals().calls == 0
    assert models.budget.refusal is not None and models.budget.reserved_usd == 0
    # A call that fits still goes through.
    assert models.complete("task", USER, max_tokens=16).text == "ok"
    assert scripted_server.request_count == 1


def test_the_worst_case_is_bounded_input_tokens_times_price_plus_max_tokens(scripted_server):
    worst = _worst(USER, 100)
    # Exactly the worst case fits; a hair less does not.
    tight = scripted_server.models(max_cost_usd=worst * 0.999)
    with pytest.raises(BudgetExhausted):
        tight.complete("task", USER, max_tokens=100)
    assert scripted_server.request_count == 0
    exact = scripted_server.models(max_cost_usd=worst)
    assert exact.complete("task", USER, max_tokens=100).text == "ok"
    assert scripted_server.request_count == 1


def test_a_reservation_is_held_while_the_call_is_in_flight_then_becomes_its_cost(
    scripted_server,
):
    scripted_server.bill(input_per_mtok=IN, output_per_mtok=OUT)
    scripted_server.script(reply("Paris", latency_s=0.4))
    models = scripted_server.models(max_cost_usd=1.0)
    seen = {}

    def call():
        seen["reply"] = models.complete("task", USER, max_tokens=300)

    worker = threading.Thread(target=call)
    worker.start()
    time.sleep(0.2)
    seen["held"] = models.budget.reserved_usd
    worker.join()
    assert seen["held"] == pytest.approx(_worst(USER, 300))
    assert models.budget.reserved_usd == 0
    # What is spent is the reply's real cost, as the server billed it.
    assert models.budget.spent_usd == pytest.approx(seen["reply"].cost_usd)
    assert models.budget.spent_usd == pytest.approx(scripted_server.billed_usd)
    assert models.budget.spent_usd < seen["held"]


def test_a_failed_call_releases_its_reservation(scripted_server):
    scripted_server.script(fail(400))
    models = scripted_server.models(max_cost_usd=0.01)
    with pytest.raises(ModelError):
        models.complete("task", USER, max_tokens=100)
    assert models.budget.reserved_usd == 0 and models.budget.spent_usd == 0
    assert models.budget.refusal is None  # a failure is not a budget stop


def test_a_reply_that_reports_no_tokens_is_held_at_its_worst_case(scripted_server):
    # A server that reports no usage would otherwise make every call free to the budget.
    scripted_server.script(reply("Paris", prompt_tokens=0, completion_tokens=0))
    models = scripted_server.models(max_cost_usd=1.0)
    got = models.complete("task", USER, max_tokens=100)
    assert got.cost_usd is None  # unknown, never $0
    assert got.cost_note == "openai/skynet-test reported no token usage"
    assert models.budget.spent_usd == pytest.approx(_worst(USER, 100))


def test_without_max_tokens_a_priced_call_sends_the_default_cap(scripted_server):
    budgeted = scripted_server.models(max_cost_usd=1.0)
    budgeted.complete("task", USER)
    assert scripted_server.requests[-1]["max_tokens"] == DEFAULT_MAX_TOKENS
    budgeted.complete("task", USER, draw=1, max_tokens=64)  # the caller's own cap is kept
    assert scripted_server.requests[-1]["max_tokens"] == 64
    free = scripted_server.models()  # no money budget: the request is as the caller made it
    free.complete("task", USER, draw=2)
    assert "max_tokens" not in scripted_server.requests[-1]


def test_a_cache_hit_reserves_nothing(scripted_server, tmp_path):
    first = scripted_server.models(tmp_path, max_cost_usd=1.0)
    first.complete("task", USER, max_tokens=100)
    first.close()
    # The same call in a session whose budget could not hold it: served from the cache.
    again = scripted_server.models(tmp_path, max_cost_usd=_worst(USER, 100) / 2)
    got = again.complete("task", USER, max_tokens=100)
    assert got.cached and scripted_server.request_count == 1
    assert again.budget.refusal is None and again.budget.spent_usd == 0


def test_concurrent_calls_cannot_jointly_pass_the_budget(scripted_server):
    scripted_server.bill(input_per_mtok=IN, output_per_mtok=OUT)
    scripted_server.responder = lambda body: reply("word " * 1000, latency_s=0.3)
    # Each call may cost up to ~$0.002 (1,000 output tokens); the budget holds 4 of them.
    limit = 4.5 * _worst(USER, 1000)
    models = scripted_server.models(max_cost_usd=limit, max_concurrent=16)
    outcomes: list[str] = []
    lock = threading.Lock()

    def call(i):
        try:
            models.complete("task", USER, draw=i, max_tokens=1000)
            outcome = "sent"
        except BudgetExhausted:
            outcome = "refused"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("sent") == 4 and outcomes.count("refused") == 12
    assert scripted_server.request_count == 4
    assert scripted_server.billed_usd <= limit
    assert models.budget.spent_usd == pytest.approx(scripted_server.billed_usd)


def test_embeddings_are_reserved_and_recorded(tmp_path):
    from skynet.testing import ScriptedServer

    with ScriptedServer(embeddings=lambda text: [1.0, 0.0]) as server:
        settings = ModelSettings(
            api_base=server.url,
            api_key="sk-loopback",
            price=Price(input_per_mtok=IN, output_per_mtok=0.0),
        )
        models = Models(
            ModelsConfig(settings={"openai/embed": settings}, cache_path=None, max_cost_usd=2e-5)
        )  # the first text holds at most 14 tokens (its UTF-8 size + 1): $1.4e-5 fits
        got = models.embed(["one two three"], model="openai/embed")
        assert got.vectors == [[1.0, 0.0]] and got.input_tokens == 3
        assert models.ledgers["metric"].totals().cost_usd == pytest.approx(3 * IN / 1e6)
        with pytest.raises(BudgetExhausted, match="metric call to openai/embed"):
            models.embed(["word " * 20], model="openai/embed")  # up to 101 tokens: > what is left
        assert server.request_count == 1


# -- an unpriced model under a money budget -------------------------------------------------
def test_an_unpriced_model_under_a_money_budget_is_refused_before_any_call(scripted_server):
    models = scripted_server.models(input_per_mtok=None, output_per_mtok=None, max_cost_usd=1.0)
    with pytest.raises(ConfigError) as refused:
        models.check_budget_prices()
    message = str(refused.value)
    assert f"'{MODEL}' has no known price" in message
    assert "task and reflection and metric model" in message
    assert f'[models.prices."{MODEL}"]' in message and "input_per_mtok" in message
    with pytest.raises(ConfigError, match="no known price"):
        models.complete("task", USER)
    assert scripted_server.request_count == 0
    # Without a money budget an unpriced model runs (its cost is shown as unknown).
    scripted_server.models(input_per_mtok=None, output_per_mtok=None).check_budget_prices()


# -- a paid call is recorded before anything else can fail ----------------------------------
def test_a_lone_surrogate_reply_is_recorded_cached_and_returned(scripted_server, tmp_path):
    scripted_server.script(reply("Par\ud800is", prompt_tokens=10, completion_tokens=2))
    models = scripted_server.models(tmp_path)
    got = models.complete("task", USER)
    assert got.text == "Par\ud800is"
    calls = models.ledgers["task"].calls
    assert len(calls) == 1 and calls[0].ok and calls[0].cost_usd == pytest.approx(14 / 1e6)
    models.close()
    again = scripted_server.models(tmp_path).complete("task", USER)  # from the cache on disk
    assert again.cached and again.text == "Par\ud800is"
    assert scripted_server.request_count == 1


def test_a_cache_write_that_fails_loses_neither_the_record_nor_the_reply(scripted_server):
    models = scripted_server.models()
    recorded = []
    models.subscribe(recorded.append)

    def broken_put(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    models.cache.put = broken_put
    with pytest.warns(RuntimeWarning, match="could not store a reply"):
        got = models.complete("task", USER)
    assert got.text == "ok"
    assert len(recorded) == 1 and recorded[0].ok
    assert models.ledgers["task"].totals().calls == 1


def test_a_lone_surrogate_in_a_prompt_is_sent_as_a_replacement_character(scripted_server):
    # A request body is UTF-8; sent as is, the call would fail (and be retried) every time.
    models = scripted_server.models()
    got = models.complete("task", [{"role": "user", "content": "judge: Par\ud800is"}])
    assert got.text == "ok" and got.attempts == 1
    assert scripted_server.requests[0]["messages"][0]["content"] == "judge: Par\ufffdis"
