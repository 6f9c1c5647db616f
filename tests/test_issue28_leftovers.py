"""Issue 28's leftovers: [budget] max_full_evals (dspy.GEPA's budget, in metric calls as dspy
counts them), the reflection cost of a run whose proposals a user's callable wrote (unknown,
never $0), and skynet.llm() with no metric model to call.

Real runs on the loopback model server, recorded in SQLite.
"""

from __future__ import annotations

import io
import json

import pytest
from projects import BETTER, COUNTRIES, make_project, task_responder
from test_python_api import _tables

import skynet
from skynet.cli import main
from skynet.config import load_config
from skynet.errors import ConfigError
from skynet.runs import RunStore

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES)
]
TRAIN, VAL = ROWS[0::2], ROWS[1::2]
SEED = "Tell the user about the country."
MODEL = "openai/skynet-test"


def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    fb = "right" if named else "the reply does not name the city"
    return float(named), {"feedback": fb}


def _optimize(url, *, budget, engine=None, train=TRAIN, val=VAL, out=None, models=None):
    tables = _tables(url)  # test_python_api's models and engine, one source
    return skynet.optimize(
        SEED,
        metric=score,
        train=train,
        val=val,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        models={**tables["models"], **(models or {})},
        engine={**tables["engine"], **(engine or {})},
        budget=budget,
        out=out,
    )


# -- [budget] max_full_evals ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("val", "per_eval", "said"),
    [
        (VAL, len(TRAIN) + len(VAL), f"{len(TRAIN)} train + {len(VAL)} val"),
        # No val given: the train rows serve as val, and dspy.GEPA (valset=None) counts them once.
        (None, len(TRAIN), f"{len(TRAIN)} train; no val given"),
    ],
    ids=["train-and-val", "no-val"],
)
def test_max_full_evals_is_metric_calls_as_dspy_counts_them(
    tmp_path, scripted_server, monkeypatch, val, per_eval, said
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    progress = io.StringIO()
    result = _optimize(scripted_server.url, budget={"max_full_evals": 2}, val=val, out=progress)
    calls = 2 * per_eval
    line = f"max_metric_calls = {calls} (max_full_evals = 2 x ({said}))"
    assert progress.getvalue().count(line) == 1, progress.getvalue()
    with RunStore(result.store / "runs.db", readonly=True) as store:
        run = store.get_run(result.run_id)
    assert run.budget["max_metric_calls"] == calls and run.budget["max_full_evals"] == 2
    assert line in run.notes["engine_choice"]
    assert f"of {calls}" in result.report()  # "Metric calls used: N of M"


@pytest.mark.slow
def test_a_run_given_max_full_evals_resumes_from_python_with_its_budget(
    tmp_path, scripted_server, monkeypatch
):
    from runs.test_resume_outage import Outage

    outage = Outage(after=10)
    scripted_server.responder = outage
    monkeypatch.chdir(tmp_path)
    with pytest.raises(skynet.RunAborted, match="evaluations failed"):
        _optimize(scripted_server.url, budget={"max_full_evals": 2}, out=io.StringIO())
    with RunStore(tmp_path / ".skynet" / "runs.db", readonly=True) as store:
        (run,) = store.list_runs()
    outage.down = False
    # The recorded budget holds both keys (max_full_evals and the max_metric_calls it made):
    # the resumed run takes the calls, not a clash between the two.
    result = skynet.resume(
        run.id,
        SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        out=io.StringIO(),
    )
    assert result.status == "finished"
    with RunStore(result.store / "runs.db", readonly=True) as store:
        assert store.get_run(run.id).budget["max_metric_calls"] == 2 * (len(TRAIN) + len(VAL))


def test_max_full_evals_too_small_to_propose_says_how_many(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    # One full evaluation of 3 train + 3 val is 6 calls; gepa needs 3 val + 2 x 3 train = 9.
    with pytest.raises(ConfigError) as caught:
        _optimize(scripted_server.url, budget={"max_full_evals": 1}, train=TRAIN[:3], val=VAL[:3])
    message = str(caught.value)
    assert "\n" not in message
    assert "budget.max_full_evals = 1 (" in message
    assert "use max_full_evals = 2 or more (or max_metric_calls = " in message


def test_max_full_evals_and_max_metric_calls_together_are_one_config_error(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _optimize("http://127.0.0.1:9/v1", budget={"max_full_evals": 1, "max_metric_calls": 20})
    message = str(caught.value)
    assert "\n" not in message
    assert "budget.max_metric_calls = 20" in message and "budget.max_full_evals = 1" in message
    assert "keep one" in message


def test_both_budgets_given_as_flags_name_the_flags_not_the_file(tmp_path, capsys):
    project = make_project(tmp_path / "p", "http://127.0.0.1:9/v1")
    flags = ["--max-metric-calls", "10", "--set", "budget.max_full_evals=2"]
    assert main(["-C", str(project), "run", *flags]) == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(
        "skynet: error: --max-metric-calls 10 and --set budget.max_full_evals=2: "
        "budget.max_metric_calls = 10 and budget.max_full_evals = 2 both set"
    ), line
    assert "skynet.toml" not in line


@pytest.mark.parametrize(
    ("value", "wanted"),
    [(0, "greater than or equal to 1"), ("2", "valid integer"), (True, "boolean")],
)
def test_max_full_evals_is_a_strict_integer_of_at_least_one(tmp_path, value, wanted):
    with pytest.raises(ConfigError) as caught:
        _optimize("http://127.0.0.1:9/v1", budget={"max_full_evals": value})
    assert "budget.max_full_evals" in str(caught.value) and wanted in str(caught.value)


def test_a_budget_flag_replaces_the_files_other_call_budget(tmp_path, scripted_server):
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    text = toml.read_text()
    assert "max_metric_calls = 40\n" in text
    toml.write_text(text.replace("max_metric_calls = 40\n", "max_full_evals = 3\n"))
    assert load_config(project).budget.max_full_evals == 3
    flagged = load_config(project, {"budget.max_metric_calls": 20}).budget
    assert flagged.max_metric_calls == 20 and flagged.max_full_evals is None
    with pytest.raises(ConfigError, match="keep one"):
        load_config(project, {"budget.max_metric_calls": 20, "budget.max_full_evals": 2})


# -- the reflection cost of proposals a user's callable wrote ---------------------------------


def _show(folder, run_id, capsys, *flags) -> str:
    capsys.readouterr()
    assert main(["-C", str(folder), "show", run_id, *flags]) == 0
    return capsys.readouterr().out


def _reflection_row(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith("reflection "))


def test_a_proposers_reflection_cost_is_unknown_never_zero(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)

    def propose(candidate, reflective_dataset, components_to_update):
        return {name: BETTER for name in components_to_update}

    out = io.StringIO()
    result = _optimize(
        scripted_server.url,
        budget={"max_metric_calls": 30},
        engine={"options": {"custom_candidate_proposer": propose}},
        out=out,
    )
    assert result.best == BETTER
    # The live progress line says so too: "reflection unknown", never "reflection $0.0000".
    progress = [line for line in out.getvalue().splitlines() if line.startswith("metric calls")]
    assert progress and all(" reflection unknown " in line for line in progress), progress
    cost = json.loads(_show(tmp_path, result.run_id, capsys, "--json"))["cost"]
    # The proposer's own model calls are outside Skynet: the role made none through it, and
    # its cost is unknown (null), not $0; the task's stays measured.
    assert cost["reflection"]["calls"] == 0 and cost["reflection"]["cost_usd"] is None
    assert cost["task"]["calls"] > 0 and cost["task"]["cost_usd"] is not None
    text = _show(tmp_path, result.run_id, capsys)
    row = _reflection_row(text)
    assert "unknown (your proposer)" in row and "$" not in row
    total = next(line for line in text.splitlines() if line.strip().startswith("total "))
    assert "+ unknown (your proposer)" in total


def test_without_a_proposer_the_reflection_cost_is_measured(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    result = _optimize(scripted_server.url, budget={"max_metric_calls": 30})
    cost = json.loads(_show(tmp_path, result.run_id, capsys, "--json"))["cost"]
    assert cost["reflection"]["calls"] > 0 and cost["reflection"]["cost_usd"] > 0
    assert "unknown" not in _reflection_row(_show(tmp_path, result.run_id, capsys))


# -- skynet.llm() with a callable reflection model and no metric model ------------------------

NO_METRIC_MODEL = 'add models={"metric": "PROVIDER/MODEL"} ([models] metric)'


def test_llm_with_a_callable_reflection_model_and_no_metric_model_says_what_to_set(
    tmp_path, scripted_server, monkeypatch
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)

    def judged(input, output, expected=None):
        verdict = skynet.llm("Does the reply name the capital? Answer yes or no.", output=output)
        return float("yes" in verdict.lower()), {"feedback": verdict}

    def my_reflection(prompt):
        return f"```\n{BETTER}\n```"

    with pytest.raises(skynet.SkynetError) as caught:
        skynet.optimize(
            SEED,
            metric=judged,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            user="Country: {country}",
            models={
                "task": MODEL,
                "reflection": my_reflection,
                "endpoints": {MODEL: {"api_base": scripted_server.url, "timeout_s": 10}},
            },
            engine={"name": "gepa", "concurrency": 2},
            budget={"max_metric_calls": 30},
        )
    message = str(caught.value)
    assert "Traceback" not in message
    # The metric's self-test names the cause and the fix on the failing item's line.
    line = next(line for line in message.splitlines() if "skynet.llm()" in line)
    assert "reflection model that stands in for it is a Python callable" in line
    assert NO_METRIC_MODEL in line
    assert not [r for r in scripted_server.requests if "Answer yes or no" in json.dumps(r)]


def test_llm_in_a_session_with_no_model_for_the_metric_role_is_one_line():
    from skynet.models import Models, ModelsConfig, using

    session = Models(ModelsConfig(task=MODEL, reflection="", cache_path=None))
    with using(session), pytest.raises(ConfigError) as caught:
        skynet.llm("Judge it.", output="Paris")
    assert "\n" not in str(caught.value) and NO_METRIC_MODEL in str(caught.value)
