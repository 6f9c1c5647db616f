"""skynet.testing.ModelDouble: the loopback server's script answered in-process. The same script
gives the same replies, failures, token counts, bill and requests as ScriptedServer, and a real
skynet.evaluate / skynet.optimize run on it records in runs.db what the run on the server does."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from projects import BETTER, task_responder
from test_python_api import SEED, TRAIN, VAL, score

import skynet
from skynet.errors import ModelError
from skynet.runs.store import RunStore
from skynet.testing import DOUBLE_MODEL, MODEL, ModelDouble, ScriptedServer, fail, hang, reply


def _script():
    return (
        reply("Paris is the capital"),
        fail(429, retry_after=0.01),
        fail(500),
        reply("Rome", prompt_tokens=7),
        fail(400),
        reply("no usage", usage=False),
        reply("", tool_calls=[("lookup", '{"q": "Lima"}')]),
        reply("a reply far longer than its max tokens allow it to be"),
    )


def _session_run(source) -> tuple[list, list, float]:
    """Five calls of a Models session on `source`: what each returned or raised, the requests
    seen (their model left out: the two names differ) and the bill."""
    source.script(*_script())
    source.bill(input_per_mtok=1.0, output_per_mtok=2.0)
    models = source.models(max_attempts=3)
    out: list = []
    for i in range(6):
        try:
            r = models.complete(
                "task", [{"role": "user", "content": f"question {i}"}], max_tokens=5
            )
            out.append((r.text, r.input_tokens, r.output_tokens, r.cost_usd, r.attempts))
            out[-1] += (r.finish_reason, r.tool_calls)
        except ModelError as exc:
            out.append(str(exc).split("): ", 1)[1].split(": ", 1)[1])  # not the endpoint
    requests = [{k: v for k, v in r.items() if k != "model"} for r in source.requests]
    return out, requests, source.billed_usd


def test_the_double_answers_a_script_as_the_server_does():
    with ScriptedServer() as server:
        served = _session_run(server)
    with ModelDouble() as double:
        doubled = _session_run(double)
    assert doubled == served
    out = doubled[0]
    assert out[0][:4] == ("Paris is the capital", 2, 4, 1e-5)  # 2 words in, 4 out, $1/$2 per M
    assert out[1][0] == "Rome" and out[1][4] == 3  # two transient failures retried
    assert "BadRequestError" in out[2] and "scripted 400" in out[2]
    assert out[3][3] is None  # no usage: unknown cost, never $0
    assert out[4][6] == ({"name": "lookup", "arguments": '{"q": "Lima"}'},)
    assert out[5][2] == 5 and out[5][5] == "length"  # a billing server stops at max_tokens


def test_the_double_honours_retry_after_and_times_out_a_hang():
    with ModelDouble() as double:
        double.script(fail(429, retry_after=0.1), reply("ok"), hang(5), hang(5))
        models = double.models(timeout_s=0.1, max_attempts=2)
        began = time.monotonic()
        assert models.complete("task", [{"role": "user", "content": "a"}]).attempts == 2
        assert time.monotonic() - began >= 0.1  # the Retry-After was waited out
        with pytest.raises(ModelError, match="no complete reply within timeout_s"):
            models.complete("task", [{"role": "user", "content": "b"}])
    assert double.request_count == 4  # the hang was asked twice, each time out


def test_a_model_with_no_double_installed_is_refused_naming_the_fix():
    double = ModelDouble(name="gone")
    models = double.models(max_attempts=1)
    double.uninstall()
    with pytest.raises(ModelError, match=r"no ModelDouble named 'gone' is installed"):
        models.complete("task", [{"role": "user", "content": "a"}])
    assert DOUBLE_MODEL == "skynet-double/skynet-test"


def _tables(model: str, url: str | None) -> dict:
    endpoint: dict = {"timeout_s": 10}
    if url:
        endpoint["api_base"] = url
    return {
        "models": {
            "task": model,
            "reflection": model,
            "endpoints": {model: endpoint},
            "prices": {model: {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        },
        "engine": {"name": "gepa", "concurrency": 2},
        "budget": {"max_metric_calls": 30},
    }


def _recorded(store_dir, run_id: str) -> tuple[Counter, list, dict]:
    """What runs.db holds of a run, the model's name left out: its calls (as a multiset: two
    threads call at once), its evaluations (by candidate text) and its cost per role."""
    with RunStore(store_dir / "runs.db", readonly=True) as store:
        calls = Counter()
        for row in store.call_rows(run_id):
            c = store.call(run_id, row.seq)
            assert c is not None
            r = c.call
            calls[
                (r.role, r.input_tokens, r.output_tokens, r.cost_usd, r.cached, r.attempts)
                + (r.ok, r.error, r.item_id, r.prompt, r.reply, r.measured)
            ] += 1
        # A candidate's id hashes the model it runs on too: its text stands in for it.
        text = {c.id: c.content for c in store.candidates(run_id)}
        evaluations = sorted(
            (repr(text[e.candidate_id]), e.split, e.item_id, repr(e.output), e.score, e.feedback)
            for e in store.evaluations(run_id)
        )
        costs = {
            role: (t.calls, t.input_tokens, t.output_tokens, round(t.cost_usd, 12))
            for role, t in store.cost_by_role(run_id).items()
        }
    return calls, evaluations, costs


@pytest.mark.slow  # a run on each: a second and more
def test_evaluate_on_the_double_records_what_it_records_on_the_server(tmp_path, monkeypatch):
    def evaluate(model: str, url: str | None, folder: str):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        return skynet.evaluate(
            BETTER,
            metric=score,
            data=VAL,
            inputs=["country"],
            outputs=["capital"],
            user="Country: {country}",
            models=_tables(model, url)["models"],
        )

    with ScriptedServer(responder=task_responder) as server:
        on_server = evaluate(MODEL, server.url, "server")
    with ModelDouble(responder=task_responder) as double:
        on_double = evaluate(double.model, None, "double")
    assert on_double.mean == on_server.mean == 1.0
    served = _recorded(tmp_path / "server" / ".skynet", on_server.run_id)
    doubled = _recorded(tmp_path / "double" / ".skynet", on_double.run_id)
    assert doubled == served
    assert sum(served[0].values()) == len(VAL)  # one task call per item, each recorded
    assert double.request_count == server.request_count == len(VAL)


@pytest.mark.slow  # a run on each: a second and more
def test_optimize_on_the_double_records_what_it_records_on_the_server(tmp_path, monkeypatch):
    def optimize(model: str, url: str | None, folder: str):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        return skynet.optimize(
            SEED,
            metric=score,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            user="Country: {country}",
            **_tables(model, url),
        )

    with ScriptedServer(responder=task_responder) as server:
        on_server = optimize(MODEL, server.url, "server")
    with ModelDouble(responder=task_responder) as double:
        on_double = optimize(double.model, None, "double")
    assert on_double.best == on_server.best == BETTER
    assert on_double.best_score == on_server.best_score == 1.0
    served = _recorded(tmp_path / "server" / ".skynet", on_server.run_id)
    doubled = _recorded(tmp_path / "double" / ".skynet", on_double.run_id)
    assert doubled == served
    assert served[2]["reflection"][0] >= 1 and served[2]["task"][0] > 0
    assert double.request_count == server.request_count
