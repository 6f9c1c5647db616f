"""DSPy metrics as the tutorials write them (issue 28), recognised by what they accept, from Python
and from a project's metric.py alike: `skynet check` says which contract was chosen; an Example
with several labels needs no key(); a function under Skynet's own contract stays as it is."""

from __future__ import annotations

import json
import textwrap

import dspy
import pytest
from artifacts.test_dspy_runs import CAPITAL, make_dspy_project, responder
from test_python_api import _tables

import skynet
from skynet.cli import main
from skynet.dspy_metric import is_dspy_metric
from skynet.runs import RunStore

# The AIME tutorial's metric, as written there (its names, its keyword defaults).
AIME = """
import dspy

def metric_with_feedback(example, prediction, trace=None, pred_name=None, pred_trace=None):
    correct = example.answer == prediction.answer
    feedback = "right" if correct else f"The correct answer is {example.answer}."
    return dspy.Prediction(score=float(correct), feedback=feedback)

score = metric_with_feedback
"""


def _defs(source: str) -> dict:
    namespace: dict = {}
    exec(textwrap.dedent(source), namespace)
    return namespace


# (case, the function's source, DSPy's or not)
FORMS = [
    ("gold-pred", "def f(gold, pred): return 1.0", True),
    ("example-pred-trace", "def f(example, pred, trace=None): return 1.0", True),
    ("aime", "def f(example, prediction, trace=None, pred_name=None, pred_trace=None): 1", True),
    ("any-names-with-trace", "def f(a, b, trace=None): return 1.0", True),
    ("pred_name-keyword-only", "def f(x, y, *, pred_name=None): return 1.0", True),
    ("skynet", "def f(input, output, expected=None): return 1.0, {}", False),
    ("skynet-reference-free", "def f(input, output): return 1.0, {}", False),
    ("example-output", "def f(example, output, expected=None): return 1.0, {}", False),
]


@pytest.mark.parametrize(("source", "dspy_form"), [f[1:] for f in FORMS], ids=[f[0] for f in FORMS])
def test_a_dspy_metric_is_known_by_what_it_accepts(source, dspy_form):
    assert is_dspy_metric(_defs(source)["f"]) is dspy_form


@pytest.mark.slow
def test_the_aime_metric_runs_from_metric_py_and_check_says_how(tmp_path, scripted_server, capsys):
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    (project / "metric.py").write_text(textwrap.dedent(AIME))
    assert main(["-C", str(project), "check"]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert (
        "metric loaded (a DSPy metric, called as metric_with_feedback(example, prediction, "
        "trace, pred_name, pred_trace))"
    ) in out
    assert "metric self-test passed" in out
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        run = store.list_runs()[0]
        evaluations = store.evaluations(run.id)
    assert {e.score for e in evaluations} == {0.0, 1.0}  # the seed misses, the best is right
    wrong = next(e for e in evaluations if e.score == 0.0)
    assert wrong.feedback.startswith("The correct answer is ")


def test_the_aime_metric_runs_from_python(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    examples = [
        dspy.Example(country=country, answer=capital).with_inputs("country")
        for country, capital in CAPITAL.items()
    ]
    result = skynet.optimize(
        dspy.Predict("country -> answer"),
        metric=_defs(AIME)["metric_with_feedback"],
        train=examples[0::2],
        val=examples[1::2],
        **_tables(scripted_server.url, budget=30),
    )
    assert result.baseline_score == 0.0 and result.best_score == 1.0


def test_an_example_with_several_labels_needs_no_key(tmp_path, scripted_server, capsys):
    """The answer key of a DSPy metric is a Prediction of all the Example's labels (here a
    solution and an answer), as a program's output is: no key() to write."""
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    data = project / "data.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    for row in rows:
        row["solution"] = f"{row['country']}'s capital is {row['answer']}"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    toml = project / "skynet.toml"
    toml.write_text(
        toml.read_text().replace('outputs = ["answer"]', 'outputs = ["answer", "solution"]')
    )
    (project / "metric.py").write_text(
        textwrap.dedent(
            """
            def score(example, prediction, trace=None):
                assert example.solution  # the Example carries every label
                return float(example.answer == prediction.answer)
            """
        )
    )
    assert main(["-C", str(project), "check"]) == 0, capsys.readouterr()
    assert "metric self-test passed" in capsys.readouterr().out


# -- dspy.configure(lm=...): honoured when no task model is given, refused when another is ------


def _capitals() -> list:
    return [
        dspy.Example(country=country, answer=capital).with_inputs("country")
        for country, capital in CAPITAL.items()
    ]


def test_a_configured_dspy_lm_is_the_task_model_through_skynet(
    tmp_path, scripted_server, monkeypatch
):
    import io

    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    lm = dspy.LM("openai/skynet-test", api_base=scripted_server.url, api_key="k", cache=False)
    with dspy.context(lm=lm):
        result = aime_optimize(
            tmp_path,
            models={"reflection": "openai/skynet-test"},
            engine={"name": "gepa"},
            budget={"max_metric_calls": 30},
            out=out,
        )
    said = out.getvalue().splitlines()[0]
    assert said == "task model openai/skynet-test: from dspy.configure(lm=...)"
    assert result.best_score == 1.0
    summary = result._summary()
    assert summary.cost["task"].calls > 0  # its calls went through Skynet's models: metered


def test_a_configured_dspy_lm_and_another_task_model_are_refused(tmp_path, scripted_server):
    lm = dspy.LM("openai/other-model", api_base=scripted_server.url, cache=False)
    with dspy.context(lm=lm), pytest.raises(skynet.ConfigError) as refused:
        aime_optimize(
            tmp_path,
            models={"task": "openai/skynet-test", "reflection": "openai/skynet-test"},
        )
    assert str(refused.value) == (
        "skynet.optimize(): dspy.configure(lm='openai/other-model') and models= task "
        "'openai/skynet-test' differ; Skynet runs the program on its task model through its own "
        "models, so the configured LM would be ignored: drop one of them"
    )
    assert scripted_server.request_count == 0 and not (tmp_path / "s").exists()


# The configured LM is taken as a program's own LMs are (take_over): its temperature and
# max_tokens are the run's [artifact] ones (artifact= wins), its api_base and key reach the server.
KEY = "sk-configured-5f1e"  # a key that must reach the server and nowhere else


def aime_optimize(tmp_path, **call):
    """The AIME tutorial's metric_with_feedback optimizing dspy.Predict("country -> answer") on
    the capitals, half train, half val, stored under tmp_path/s: the call the DSPy tests share."""
    examples = _capitals()
    return skynet.optimize(
        dspy.Predict("country -> answer"),
        metric=_defs(AIME)["metric_with_feedback"],
        train=examples[0::2],
        val=examples[1::2],
        store=tmp_path / "s",
        **call,
    )


def _configured_run(tmp_path, server, lm, serve=responder, **extra):
    import io

    server.responder = serve
    out = io.StringIO()
    with dspy.context(lm=lm):
        result = aime_optimize(
            tmp_path,
            models={
                "reflection": "openai/reflection-model",
                "endpoints": {"openai/reflection-model": {"api_base": server.url}},
                **extra.pop("models", {}),
            },
            engine={"name": "gepa", **extra.pop("engine", {})},
            budget={"max_metric_calls": 20, **extra.pop("budget", {})},
            out=out,
            **extra,
        )
    with RunStore(result.store / "runs.db", readonly=True) as store:
        artifact = store.get_run(result.run_id).config["artifact"]
    # The program's requests (the reflection model's are the rest), with their headers.
    task = [
        (body, headers)
        for body, headers in zip(server.requests, server.request_headers, strict=True)
        if body.get("model") == "skynet-test"
    ]
    assert task and result.best_score == 1.0
    return out.getvalue(), artifact, task


def test_a_configured_lms_temperature_and_max_tokens_are_the_runs_artifact_settings(
    tmp_path, scripted_server
):
    lm = dspy.LM(
        "openai/skynet-test",
        api_base=scripted_server.url,
        temperature=0.7,
        max_tokens=777,
        cache=False,
    )
    out, artifact, task = _configured_run(tmp_path, scripted_server, lm)
    assert out.splitlines()[0] == (
        "task model openai/skynet-test: from dspy.configure(lm=...), at its temperature 0.7 "
        "and max_tokens 777"
    )
    assert {(b["temperature"], b["max_tokens"]) for b, _ in task} == {(0.7, 777)}
    # Recorded as the run's settings: they decide outputs (the fingerprint holds them).
    assert (artifact["temperature"], artifact["max_tokens"]) == (0.7, 777)


def test_artifact_given_wins_over_the_configured_lms_settings(tmp_path, scripted_server):
    lm = dspy.LM(
        "openai/gpt-5",  # a reasoning model: dspy keeps its max_tokens as max_completion_tokens
        api_base=scripted_server.url,
        temperature=1.0,
        max_tokens=16000,
        cache=False,
    )
    assert lm.kwargs["max_completion_tokens"] == 16000
    lm.model = "openai/skynet-test"  # the loopback server's name for it
    out, artifact, task = _configured_run(
        tmp_path, scripted_server, lm, artifact={"temperature": 0.25}
    )
    assert "at its max_tokens 16000" in out.splitlines()[0]
    assert {(b["temperature"], b["max_tokens"]) for b, _ in task} == {(0.25, 16000)}
    assert (artifact["temperature"], artifact["max_tokens"]) == (0.25, 16000)


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_a_configured_lms_api_key_is_sent_and_never_recorded(tmp_path, scripted_server, executor):
    """Under a money budget with the model's price declared (and no endpoint): the price is
    the declared one, the api_base and key the LM's; in worker processes too."""
    lm = dspy.LM("openai/skynet-test", api_base=scripted_server.url, api_key=KEY, cache=False)
    price = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
    out, _, task = _configured_run(
        tmp_path,
        scripted_server,
        lm,
        models={"prices": {"openai/skynet-test": price, "openai/reflection-model": price}},
        budget={"max_cost_usd": 1.0},
        engine={"executor": executor},
    )
    assert {headers.get("authorization") for _, headers in task} == {f"Bearer {KEY}"}
    assert KEY not in out
    stored = [path for path in (tmp_path / "s").rglob("*") if path.is_file()]
    assert any(path.name == "runs.db" for path in stored)
    assert not [path for path in stored if KEY.encode() in path.read_bytes()]


@pytest.mark.slow
def test_a_resumed_run_reaches_the_configured_lm_as_the_run_did(tmp_path, scripted_server):
    """On resume the recorded tables name the task model: the configured LM is still the one
    that reaches it (api_base and key, not recorded), at the recorded settings."""
    import io

    from skynet.testing import fail

    down = [True]
    served = [0]

    def outage(body):
        if body.get("model") == "skynet-test":
            served[0] += 1
            if down[0] and served[0] > 6:
                return fail(503, retry_after=0)
        return responder(body)

    lm = dspy.LM(
        "openai/skynet-test",
        api_base=scripted_server.url,
        api_key=KEY,
        temperature=0.5,
        cache=False,
    )
    with pytest.raises(skynet.RunAborted, match="evaluations failed"):
        _configured_run(tmp_path, scripted_server, lm, serve=outage)
    with RunStore(tmp_path / "s" / "runs.db", readonly=True) as store:
        (run,) = store.list_runs()
    down[0], paid = False, scripted_server.request_count
    examples = _capitals()
    with dspy.context(lm=lm):
        result = skynet.resume(
            run.id,
            dspy.Predict("country -> answer"),
            metric=_defs(AIME)["metric_with_feedback"],
            train=examples[0::2],
            val=examples[1::2],
            store=tmp_path / "s",
            out=io.StringIO(),
        )
    assert result.status == "finished" and result.best_score == 1.0
    sent = zip(scripted_server.requests, scripted_server.request_headers, strict=True)
    resumed = [(b, h) for b, h in list(sent)[paid:] if b.get("model") == "skynet-test"]
    assert resumed and {h.get("authorization") for _, h in resumed} == {f"Bearer {KEY}"}
    assert {b["temperature"] for b, _ in resumed} == {0.5}
