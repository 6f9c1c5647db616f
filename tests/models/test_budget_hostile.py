"""Cost attacks a hostile candidate tried on the budget and the run store (issue 25), each with
its control: the same attack with the defence switched off succeeds.

- A call that times out is billed by a hosted provider: its reservation is kept as spent, each
  retry reserves again, and the kept cost is in the ledger, the run store and a resumed budget.
- A provider whose tokenizer counts more than litellm's: every call is reserved at the UTF-8
  bound, so 8 concurrent prompts of spaces cannot pass max_cost_usd.
- 16 model requests of ~1 MB from a sandboxed candidate: runs.db keeps a bounded part of them.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from skynet import BudgetExhausted, ModelError
from skynet.measure import metering
from skynet.models import Models, ModelsConfig, ModelSettings, Price, RetryPolicy, using
from skynet.models import client as client_module
from skynet.models.budget import Budget, count_input_tokens, input_token_bound
from skynet.models.ledger import CALL_TEXT_BYTES, EVALUATION_TEXT_BYTES
from skynet.runs import RunStore, runs_db_path
from skynet.testing import MODEL, ScriptedServer, fail, hang, reply

IN, OUT = 1.0, 2.0  # USD per million tokens: the declared price and what the server bills
USER = [{"role": "user", "content": "What is the capital of France ?"}]


def _new_run(store: RunStore) -> str:
    return store.create_run(
        config={"engine": {"name": "gepa"}},
        dataset_hash="d" * 64,
        metric_hash="m1",
        seed=0,
        engine="gepa",
        budget={},
        versions={"skynet": "test"},
    )


def _worst(messages, max_tokens):
    return (input_token_bound(messages) * IN + max_tokens * OUT) / 1e6


# -- a call that times out is billed: its reservation is kept --------------------------------
@pytest.fixture
def billing():
    with ScriptedServer() as server:
        server.bill(input_per_mtok=IN, output_per_mtok=OUT)
        yield server


def _timing_out(server: ScriptedServer, limit: float) -> Models:
    server.script(*[hang(3) for _ in range(4)])
    return server.models(timeout_s=0.3, max_attempts=4, max_cost_usd=limit)


@pytest.mark.slow
def test_a_timed_out_call_keeps_its_reservation_and_each_retry_reserves_again(billing, tmp_path):
    # Each attempt may cost ~$0.006 (3,000 output tokens): 3 fit in $0.02, the 4th does not.
    limit, cap = 0.02, 3000
    models = _timing_out(billing, limit)
    store = RunStore(runs_db_path(tmp_path))
    run_id = _new_run(store)
    models.subscribe(lambda record: store.record_call(run_id, record))
    with pytest.raises(BudgetExhausted):
        models.complete("task", USER, max_tokens=cap)
    assert billing.request_count == 3  # the 4th attempt was never sent
    assert billing.billed_usd <= limit  # what the provider billed stays within the budget
    kept = 3 * _worst(USER, cap)
    assert models.budget.spent_usd == pytest.approx(kept) and models.budget.reserved_usd == 0
    assert models.budget.spent_usd >= billing.billed_usd  # never counted below the bill
    # The ledger says what the failed attempts were counted at, and that it is an upper bound.
    (record,) = models.ledgers["task"].calls
    assert not record.ok and record.attempts == 3
    assert record.cost_usd == pytest.approx(kept)
    assert "cost at most $" in record.error and "reservation of 3 attempt(s) kept" in record.error
    totals = models.ledgers["task"].totals()
    assert totals.cost_usd == pytest.approx(kept) and totals.failed_cost_usd == pytest.approx(kept)
    assert "failed calls: at most $" in totals.cost_text
    # The run store sums it, and a resumed run counts it against the same limit.
    recorded = sum(t.cost_usd for t in store.cost_by_role(run_id).values())
    assert recorded == pytest.approx(kept)
    resumed = Budget(limit)
    resumed.add_spent(recorded)
    with pytest.raises(BudgetExhausted):
        resumed.reserve(_worst(USER, cap), role="task", model=MODEL)
    store.close()


@pytest.mark.slow
def test_control_a_released_time_out_is_retried_past_the_budget(billing, monkeypatch):
    # The old behaviour: a failed attempt releases its reservation, and the provider bills all 4.
    monkeypatch.setattr(client_module, "_may_be_billed", lambda exc: False)
    limit, cap = 0.02, 3000
    models = _timing_out(billing, limit)
    with pytest.raises(ModelError):
        models.complete("task", USER, max_tokens=cap)
    assert billing.request_count == 4
    assert billing.billed_usd > limit
    assert models.budget.spent_usd == 0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("step", "kept"),
    [
        (fail(400), False),  # the provider refused the request: no usage, not billed
        (fail(429), False),
        (fail(404), False),
        (fail(500), True),  # it may have run the request before failing
        (fail(503), True),
        (hang(3), True),  # abandoned by Skynet, finished and billed by the provider
        (None, False),  # connection refused: nothing was sent
    ],
)
def test_a_failed_attempt_is_kept_unless_the_provider_refused_it_or_never_got_it(step, kept):
    with ScriptedServer() as server:
        if step is None:
            settings = ModelSettings(
                api_base=f"http://127.0.0.1:{_closed_port()}/v1",
                api_key="sk-loopback",
                timeout_s=0.3,
                price=Price(input_per_mtok=IN, output_per_mtok=OUT),
            )
            models = Models(
                ModelsConfig(
                    task=MODEL,
                    settings={MODEL: settings},
                    cache_path=None,
                    retry=RetryPolicy(max_attempts=1),
                    max_cost_usd=1.0,
                )
            )
        else:
            server.script(step)
            models = server.models(timeout_s=0.3, max_attempts=1, max_cost_usd=1.0)
        with pytest.raises(ModelError):
            models.complete("task", USER, max_tokens=100)
    assert models.budget.reserved_usd == 0
    expected = _worst(USER, 100) if kept else 0.0
    assert models.budget.spent_usd == pytest.approx(expected)
    (record,) = models.ledgers["task"].calls
    assert (record.cost_usd or 0.0) == pytest.approx(expected)


def test_a_call_that_succeeds_after_a_kept_attempt_charges_both_to_the_item(billing):
    billing.script(hang(3), reply("Paris"))
    models = billing.models(timeout_s=0.3, max_attempts=2, max_cost_usd=1.0)
    with using(models), metering("i1") as meter:
        got = models.complete("task", USER, max_tokens=100)
    assert got.text == "Paris"
    kept = _worst(USER, 100)
    failed, ok = models.ledgers["task"].calls
    assert not failed.ok and failed.cost_usd == pytest.approx(kept) and ok.ok
    assert models.budget.spent_usd == pytest.approx(kept + got.cost_usd)
    assert models.ledgers["task"].totals().cost_usd == pytest.approx(kept + got.cost_usd)
    # The item's candidate started both attempts: both are its cost.
    assert meter.observation().cost_usd == pytest.approx(kept + got.cost_usd)


# -- a tokenizer that counts more than litellm's ----------------------------------------------
SPACES = 50_000  # litellm counts ~400 tokens; a byte-level tokenizer up to 50,000


def _spaces_attack(limit: float) -> tuple[ScriptedServer, Models]:
    server = ScriptedServer(
        responder=lambda body: reply("ok", latency_s=0.3),
        count_tokens=lambda text: len(text.encode("utf-8")),  # one token per byte
    ).start()
    server.bill(input_per_mtok=IN, output_per_mtok=OUT)
    models = server.models(max_cost_usd=limit, max_concurrent=8)
    start = threading.Barrier(8)

    def call(i: int) -> None:
        start.wait()
        try:
            models.complete(
                "task", [{"role": "user", "content": " " * SPACES + str(i)}], max_tokens=8
            )
        except BudgetExhausted:
            pass

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    server.stop()
    return server, models


def test_prompts_of_spaces_cannot_pass_the_budget_under_concurrency():
    limit = 0.10
    server, models = _spaces_attack(limit)
    assert server.request_count >= 1
    # The documented bound: a provider counting at most one token per byte is held exactly.
    assert server.billed_usd <= limit
    assert models.budget.spent_usd <= limit
    assert models.budget.spent_usd == pytest.approx(server.billed_usd)


def test_control_reserving_litellms_count_lets_8_prompts_of_spaces_overrun(monkeypatch):
    def litellm_count(model, messages, tools=None):
        tokens, _ = count_input_tokens(model, messages, tools)
        return tokens, f"counted {tokens:,} input tokens"

    monkeypatch.setattr(client_module, "worst_input_tokens", litellm_count)
    limit = 0.10
    server, models = _spaces_attack(limit)
    assert server.request_count == 8
    assert server.billed_usd > 3 * limit


def test_the_byte_bound_is_never_below_litellms_count():
    for text in ("What is the capital of France ?", " " * 5000, "naïve café 東京 " * 300, "x"):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
        assert input_token_bound(messages) >= count_input_tokens(MODEL, messages)[0]


# -- 16 requests of ~1 MB from a sandboxed candidate -----------------------------------------
FLOOD = """
from skynet_sandbox import ModelCallFailed, complete

def run(input):
    sent = 0
    for i in range(16):
        try:
            complete(str(i) + " word" * 200_000, max_tokens=1)  # ~1 MB each
            sent += 1
        except ModelCallFailed:
            pass
    return {"sent": sent}
"""

BIG = """
from skynet_sandbox import ModelCallFailed, complete

def run(input):
    try:
        complete("word " * 400_000, max_tokens=1)  # ~2 MB
    except ModelCallFailed as exc:
        return {"refused": str(exc)}
    return {"refused": ""}
"""


def _db_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _run_code(source: str, tmp_path: Path, server: ScriptedServer) -> tuple[object, int, Models]:
    from skynet.artifacts.code import CodeArtifact
    from skynet.sandbox import Limits, check_available

    check_available("bwrap")
    path = runs_db_path(tmp_path)
    store = RunStore(path)
    run_id = _new_run(store)
    store.close()
    before = _db_bytes(path)
    store = RunStore(path)
    models = server.models(None)
    models.subscribe(lambda record: store.record_call(run_id, record))
    art = CodeArtifact(source=source, limits=Limits(wall_s=120), sandbox="bwrap")
    with using(models), metering("i1"):
        output = art.run({"code": source}, {})
    store.close()
    return output, _db_bytes(path) - before, models


@pytest.mark.slow
def test_sixteen_requests_of_a_megabyte_keep_runs_db_small(tmp_path, scripted_server):
    output, grown, models = _run_code(FLOOD, tmp_path, scripted_server)
    assert output == {"sent": 16}
    assert scripted_server.request_count == 16
    # The documented bound: the texts of one evaluation's calls together, plus their rows.
    assert grown < EVALUATION_TEXT_BYTES + (256 << 10), grown
    calls = models.ledgers["task"].calls
    assert all(len(c.prompt.encode()) <= CALL_TEXT_BYTES + 200 for c in calls)
    assert "[cut: " in calls[0].prompt and "sha256 " in calls[-1].prompt


@pytest.mark.slow
def test_control_without_the_bound_sixteen_requests_grow_runs_db_by_16_mb(
    tmp_path, scripted_server, monkeypatch
):
    monkeypatch.setattr("skynet.runs.store.CALL_TEXT_BYTES", 1 << 30)
    monkeypatch.setattr(client_module, "CALL_TEXT_BYTES", 1 << 30)
    monkeypatch.setattr(client_module, "EVALUATION_TEXT_BYTES", 1 << 30)
    output, grown, _ = _run_code(FLOOD, tmp_path, scripted_server)
    assert output == {"sent": 16}
    assert grown > 15_000_000, grown


RAW = """
import json
import socket

def run(input):
    # Past skynet_sandbox's own check: ~2 MB straight onto the model socket.
    request = {"messages": [{"role": "user", "content": "word " * 400_000}], "max_tokens": 1}
    conn = socket.socket(socket.AF_UNIX)
    conn.connect("/skynet/model.sock")
    try:
        conn.sendall((json.dumps(request) + "\\n").encode())
    except OSError as exc:
        return {"reply": f"send failed: {exc}"}
    return {"reply": conn.makefile("rb").readline().decode()}
"""


def test_a_request_past_a_megabyte_is_refused_with_the_bound(tmp_path, scripted_server):
    output, _, _ = _run_code(BIG, tmp_path, scripted_server)
    assert "more than 1,048,576 bytes" in output["refused"], output
    assert "send a shorter prompt" in output["refused"]
    raw, _, _ = _run_code(RAW, tmp_path / "raw", scripted_server)
    assert '"text"' not in raw["reply"], raw  # refused by Skynet, whatever it sends
    assert scripted_server.request_count == 0


@pytest.mark.slow
def test_control_the_old_4_mb_bound_sends_it_to_the_model(tmp_path, scripted_server, monkeypatch):
    monkeypatch.setattr("skynet.sandbox._proxy._MAX_REQUEST_BYTES", 4 << 20)
    raw, _, _ = _run_code(RAW, tmp_path, scripted_server)
    assert '"text": "ok"' in raw["reply"], raw
    assert scripted_server.request_count == 1
