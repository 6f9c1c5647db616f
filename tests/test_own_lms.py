"""A program's and a metric's own model calls (issue 28): PAPILLON's table showed task 0 calls /
$0 while the server took 234 requests. A predictor's `set_lm(...)` and an LM kept as a module's
attribute take Skynet's path (ledger, cache, budget) as task calls; a metric's DSPy judge with an
LM of its own is seen and recorded as unmeasured, never $0; the LM in force
(dspy.configure(lm=...)) used by a metric's judge is metered as metric calls; the self-test's
model calls are recorded in the run and said in the report."""

from __future__ import annotations

import io

import dspy
import pytest
from artifacts.test_dspy_runs import CAPITAL, responder
from test_python_api import _tables

import skynet
from skynet.runs import RunStore
from skynet.runs.report import render_text, summarize, summary_json
from skynet.testing import reply

OWN = "openai/own-lm"  # a model skynet.toml does not declare: reached as the LM says


def _examples() -> list:
    return [
        dspy.Example(country=country, answer=capital).with_inputs("country")
        for country, capital in CAPITAL.items()
    ]


def _metric(gold, pred, trace=None):
    return float(gold.answer == pred.answer)


def _optimize(program, metric, url, **extra):
    examples = _examples()
    return skynet.optimize(
        program,
        metric=metric,
        train=examples[0::2],
        val=examples[1::2],
        out=io.StringIO(),
        **{**_tables(url, budget=20), **extra},
    )


def _calls(result) -> list:
    with RunStore(result.store / "runs.db", readonly=True) as store:
        return store.calls(result.run_id)


def _report(result) -> tuple[str, dict]:
    with RunStore(result.store / "runs.db", readonly=True) as store:
        summary = summarize(store, result.run_id)
    return render_text(summary), summary_json(summary)


def _sent(server, model: str) -> int:
    return sum(1 for body in server.requests if body.get("model") == model.split("/", 1)[1])


@pytest.mark.slow
def test_a_predictors_own_lm_takes_skynets_path_as_task_calls(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    program = dspy.Predict("country -> answer")
    program.set_lm(dspy.LM(OWN, api_base=scripted_server.url, api_key="k", cache=False))
    result = _optimize(program, _metric, scripted_server.url)
    own = [c for c in _calls(result) if c.model == OWN]
    # Every request the server took for the program's LM is a recorded, measured task call.
    sent = [c for c in own if not c.cached]
    assert sent and len(sent) == _sent(scripted_server, OWN)
    assert {c.role for c in own} == {"task"} and all(c.measured for c in own)
    assert all(c.input_tokens > 0 for c in sent)
    text, summary = _report(result)
    task = summary["cost"]["task"]
    assert task["calls"] == len(own) and task["unmeasured_calls"] == 0
    # openai/own-lm has no known price: its cost is unpriced, never $0.
    assert task["cost_usd"] is None and task["unpriced_calls"] == len(own)
    assert "Not measured" not in text
    # The user's program keeps its own LM: the run took over a copy.
    assert isinstance(program.lm, dspy.LM) and program.lm.model == OWN


class _WithAttribute(dspy.Module):
    """An LM held as an attribute, used with dspy.context (a pattern PAPILLON's modules use)."""

    def __init__(self, lm):
        super().__init__()
        self.writer_lm = lm
        self.answer = dspy.Predict("country -> answer")

    def forward(self, country):
        with dspy.context(lm=self.writer_lm):
            return self.answer(country=country)


def test_an_lm_kept_as_an_attribute_takes_skynets_path(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    lm = dspy.LM(OWN, api_base=scripted_server.url, api_key="k", cache=False)
    result = _optimize(_WithAttribute(lm), _metric, scripted_server.url)
    own = [c for c in _calls(result) if c.model == OWN]
    assert own and {c.role for c in own} == {"task"}
    assert len([c for c in own if not c.cached]) == _sent(scripted_server, OWN)


def test_a_money_budget_refuses_an_unpriced_own_lm_before_any_call(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    program = dspy.Predict("country -> answer")
    program.set_lm(dspy.LM(OWN, api_base=scripted_server.url, api_key="k", cache=False))
    try:
        _optimize(
            program,
            _metric,
            scripted_server.url,
            budget={"max_metric_calls": 20, "max_cost_usd": 1.0},
        )
    except skynet.ConfigError as exc:
        assert f"'{OWN}' has no known price" in str(exc)
        assert "[budget] max_cost_usd = 1 is set" in str(exc)
    else:
        raise AssertionError("an unpriced own LM under a money budget was not refused")
    assert scripted_server.request_count == 0


class _Judge(dspy.Signature):
    """Is the answer the country's capital?"""

    country: str = dspy.InputField()
    answer: str = dspy.InputField()
    verdict: str = dspy.OutputField()


def _judge_responder(body):
    if "[[ ## verdict ## ]]" in body["messages"][0]["content"]:
        return reply("[[ ## verdict ## ]]\nyes\n\n[[ ## completed ## ]]")
    return responder(body)


@pytest.mark.slow
def test_a_metrics_judge_with_its_own_lm_is_recorded_unmeasured_never_0(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = _judge_responder
    monkeypatch.chdir(tmp_path)
    judge = dspy.Predict(_Judge)
    judge.set_lm(dspy.LM("openai/judge-lm", api_base=scripted_server.url, api_key="k", cache=False))

    def metric(gold, pred, trace=None):
        verdict = judge(country=gold.country, answer=pred.answer).verdict
        return float(gold.answer == pred.answer and verdict == "yes")

    result = _optimize(dspy.Predict("country -> answer"), metric, scripted_server.url)
    judged = [c for c in _calls(result) if c.model == "openai/judge-lm"]
    # Every judge request the server took is in the run, as the metric's, not measured.
    assert len(judged) == _sent(scripted_server, "openai/judge-lm") > 0
    assert {c.role for c in judged} == {"metric"} and not any(c.measured for c in judged)
    assert all(c.cost_usd is None for c in judged)
    text, summary = _report(result)
    metric_cost = summary["cost"]["metric"]
    assert metric_cost["unmeasured_calls"] == len(judged)
    assert metric_cost["cost_usd"] is None  # unknown, never $0
    assert metric_cost["untokened_calls"] == 0  # not "the server reported no usage"
    assert f"Not measured: {len(judged)} model call(s) (metric {len(judged)})" in text


@pytest.mark.slow
def test_the_configured_lm_a_metrics_judge_uses_is_metered_as_metric_calls(
    tmp_path, scripted_server, monkeypatch
):
    """dspy.configure(lm=...) is the task model (honoured) and what a judge without an LM of its
    own uses: inside the metric its calls take Skynet's path as the metric role's."""
    scripted_server.responder = _judge_responder
    monkeypatch.chdir(tmp_path)
    judge = dspy.Predict(_Judge)

    def metric(gold, pred, trace=None):
        verdict = judge(country=gold.country, answer=pred.answer).verdict
        return float(gold.answer == pred.answer and verdict == "yes")

    tables = _tables(scripted_server.url, budget=20)
    tables["models"] = {k: v for k, v in tables["models"].items() if k != "task"}
    lm = dspy.LM("openai/skynet-test", api_base=scripted_server.url, api_key="k", cache=False)
    examples = _examples()
    before = dspy.settings.lm
    dspy.configure(lm=lm)  # global, as the tutorials do: the metric's threads see it
    try:
        result = skynet.optimize(
            dspy.Predict("country -> answer"),
            metric=metric,
            train=examples[0::2],
            val=examples[1::2],
            out=io.StringIO(),
            **tables,
        )
    finally:
        dspy.configure(lm=before)
    calls = _calls(result)
    judged = [c for c in calls if c.role == "metric"]
    assert judged and all(c.measured and c.cost_usd is not None for c in judged)
    sent = [c for c in calls if not c.cached]
    assert len(sent) == scripted_server.request_count  # nothing went around Skynet


@pytest.mark.slow
def test_the_self_tests_model_calls_are_recorded_and_reported(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = _judge_responder
    monkeypatch.chdir(tmp_path)

    def metric(input, output, expected=None):
        verdict = skynet.llm(f"Is {output} the capital of {input['country']}? yes or no")
        return float(output == expected["answer"]), {"feedback": f"judge said {verdict}"}

    examples = [{"country": c, "answer": a} for c, a in CAPITAL.items()]
    result = skynet.optimize(
        "Answer with the capital.",
        metric=metric,
        train=examples[0::2],
        val=examples[1::2],
        user="{country}",
        out=io.StringIO(),
        **_tables(scripted_server.url, budget=12),
    )
    with RunStore(result.store / "runs.db", readonly=True) as store:
        run = store.get_run(result.run_id)
        calls = store.calls(result.run_id)
    (tested,) = run.notes["self_test"]
    assert tested["mode"] == "full" and tested["metric_calls"] > 0
    assert tested["model_calls"] > 0 and tested["cost_usd"] is not None
    # They are in the run's calls (metric role), counted before the search's first call.
    first = calls[: tested["model_calls"]]
    assert {c.role for c in first} == {"metric"}
    assert sum(not c.cached for c in calls) == scripted_server.request_count
    text, _ = _report(result)
    assert (
        f"Metric self-test: {tested['metric_calls']} metric calls made "
        f"{tested['model_calls']} model calls"
    ) in text
