"""skynet.optimize / evaluate / resume: the pipeline of `skynet run` and `skynet eval` from
Python, on the loopback server, with rows in memory and a metric function; the runs it records
are ordinary runs that the CLI reads."""

from __future__ import annotations

import io
import json

import pytest
from artifacts.test_dspy_runs import CAPITAL, responder
from projects import BETTER, COUNTRIES, make_project, task_responder

import skynet
from skynet.cli import main
from skynet.runs.store import RunStore

ROWS = [
    {"id": f"c{i}", "country": country, "capital": capital}
    for i, (country, capital) in enumerate(COUNTRIES)
]
TRAIN, VAL = ROWS[0::2], ROWS[1::2]  # make_project's split: even rows train, odd rows val
SEED = "Tell the user about the country."


def score(input, output, expected=None):
    named = expected["capital"].lower() in output.lower()
    fb = "right" if named else f"name the capital: {expected['capital']}"
    return float(named), {"feedback": fb}


def _tables(url: str, budget: int = 40) -> dict:
    return {
        "models": {
            "task": "openai/skynet-test",
            "reflection": "openai/skynet-test",
            "endpoints": {"openai/skynet-test": {"api_base": url, "timeout_s": 10}},
            "prices": {"openai/skynet-test": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}},
        },
        "engine": {"name": "gepa", "concurrency": 2},
        "budget": {"max_metric_calls": budget},
    }


def _evaluations(db) -> list[tuple]:
    with RunStore(db, readonly=True) as store:
        return sorted(
            (e.candidate_id, e.item_id, json.dumps(e.output), e.score, e.feedback)
            for run in store.list_runs()
            for e in store.evaluations(run.id)
        )


@pytest.mark.slow
def test_optimize_from_python_records_the_run_the_cli_makes(tmp_path, scripted_server, monkeypatch):
    scripted_server.responder = task_responder
    # The CLI's run of the same project (files on disk) ...
    project = make_project(tmp_path / "cli", scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    # ... and the same run from Python, rows in memory, a metric function.
    monkeypatch.chdir(tmp_path)
    progress = io.StringIO()
    result = skynet.optimize(
        SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        out=progress,
        **_tables(scripted_server.url),
    )
    assert isinstance(result, skynet.RunResult)
    assert result.best == BETTER  # the seed's kind: a str
    assert result.baseline_score == 0.0 and result.best_score == 1.0
    assert result.status == "finished"
    assert "metric calls" in progress.getvalue()
    assert result.store == tmp_path / ".skynet"
    # The same evaluations as the CLI's run: the same candidates, outputs and scores.
    assert _evaluations(result.store / "runs.db") == _evaluations(project / ".skynet" / "runs.db")
    # An ordinary run: the CLI lists and reports it from the folder holding .skynet.
    assert main(["-C", str(tmp_path), "runs"]) == 0
    assert main(["-C", str(tmp_path), "show", result.run_id]) == 0
    report = result.report()
    assert "baseline" in report and "+1.000" in report
    page = result.to_html(tmp_path / "report.html")
    assert "<html" in page.read_text()
    assert "skynet run" in result._repr_html_() and BETTER in result._repr_html_()
    assert [c["candidate"]["instructions"] for c in result.candidates][:1] == [SEED]


def test_evaluate_scores_a_candidate_on_rows(tmp_path, model_double, monkeypatch):
    model_double.responder = task_responder
    monkeypatch.chdir(tmp_path)
    ev = skynet.evaluate(
        BETTER,
        metric=score,
        data=VAL,
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        models=model_double.models_table(),
    )
    assert ev.mean == 1.0 and len(ev.results) == len(VAL)
    assert all(r.score == 1.0 and r.feedback == "right" for r in ev.results)
    assert main(["-C", str(tmp_path), "show", ev.run_id]) == 0


def test_a_bad_table_key_is_a_config_error_naming_the_nearest(tmp_path, scripted_server):
    with pytest.raises(
        skynet.ConfigError, match=r"unknown key 'engine.nam'; did you mean 'engine.name'"
    ):
        skynet.optimize(
            SEED,
            metric=score,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            engine={"nam": "auto"},
            store=tmp_path / "s",
        )
    assert scripted_server.request_count == 0


def test_a_bad_metric_is_a_contract_error_before_any_model_call(tmp_path, scripted_server):
    scripted_server.responder = task_responder

    def bad(input, output, expected=None):
        return "high"  # not a number

    with pytest.raises(skynet.ContractError, match="Metric return value"):
        skynet.optimize(
            SEED,
            metric=bad,
            train=TRAIN,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            store=tmp_path / "s",
            **_tables(scripted_server.url),
        )
    assert scripted_server.request_count == 0


# -- the other seed kinds ------------------------------------------------------------------------


def test_a_dspy_program_with_a_dspy_metric_returns_the_optimized_module(
    tmp_path, scripted_server, monkeypatch
):
    import dspy

    scripted_server.responder = responder
    monkeypatch.chdir(tmp_path)
    examples = [
        dspy.Example(country=country, answer=capital).with_inputs("country")
        for country, capital in CAPITAL.items()
    ]

    def metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
        right = pred.answer == gold.answer
        return dspy.Prediction(score=float(right), feedback="right" if right else "say it")

    program = dspy.Predict("country -> answer")
    result = skynet.optimize(
        program,
        metric=metric,
        train=examples[0::2],
        val=examples[1::2],
        **_tables(scripted_server.url, budget=30),
    )
    assert isinstance(result.best, dspy.Module)
    assert result.best.signature.instructions == "Name the capital city of the country."
    assert program.signature.instructions != result.best.signature.instructions  # a copy
    assert result.baseline_score == 0.0 and result.best_score == 1.0


SUM_CODE = "def run(input):\n    return sum(range(input['n']))\n"  # one short: 0..n-1
SUM_FIXED = "def run(input):\n    return sum(range(input['n'] + 1))\n"


def sum_score(input, output, expected=None):
    right = output == expected["total"]
    return float(right), {"feedback": "right" if right else f"expected {expected['total']}"}


@pytest.mark.slow
def test_a_code_seed_runs_sandboxed_and_comes_back_as_code(tmp_path, scripted_server, monkeypatch):
    from skynet.testing import reply

    scripted_server.responder = lambda body: reply(f"```python\n{SUM_FIXED}```")
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"n{n}", "n": n, "total": n * (n + 1) // 2} for n in range(12)]
    tables = _tables(scripted_server.url, budget=30)
    result = skynet.optimize(
        skynet.Code(SUM_CODE),
        metric=sum_score,
        train=rows[0::2],
        val=rows[1::2],
        inputs=["n"],
        outputs=["total"],
        **tables,
    )
    assert isinstance(result.best, skynet.Code)
    assert result.best.source.strip() == SUM_FIXED.strip()
    assert result.baseline_score == 0.0 and result.best_score == 1.0
    ev = skynet.evaluate(result.best, metric=sum_score, data=rows, inputs=["n"], outputs=["total"])
    assert ev.mean == 1.0


@pytest.mark.slow
def test_rows_as_a_dataframe_and_as_a_file_make_the_same_dataset(tmp_path, scripted_server):
    import json

    import pandas as pd

    from skynet.api import _project

    file = tmp_path / "rows.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    built = {}
    for name, data in [("list", ROWS), ("frame", pd.DataFrame(ROWS)), ("file", file)]:
        project, _ = _project(
            SEED,
            metric=score,
            splits={"data": data},
            fractions={"train": 0.5, "val": 0.5, "seed": 1},
            inputs=["country"],
            outputs=None,  # inferred: the columns that are not inputs nor the id
            id_column=None,
            user=None,
            tables={},
            store_dir=tmp_path / "s",
        )
        built[name] = project.dataset
    assert built["list"].hash == built["frame"].hash == built["file"].hash
    assert built["list"].train[0].expected.keys() == {"capital"}


@pytest.mark.slow
def test_resume_goes_on_from_what_was_recorded(tmp_path, scripted_server, monkeypatch):
    from runs.test_resume_outage import Outage

    outage = Outage(after=12)  # the model goes down mid-run: the run aborts, recorded
    scripted_server.responder = outage
    monkeypatch.chdir(tmp_path)
    common = dict(metric=score, train=TRAIN, val=VAL, user="Country: {country}")
    with pytest.raises(skynet.RunAborted, match="evaluations failed"):
        skynet.optimize(SEED, **common, **_tables(scripted_server.url))
    (run,) = _runs(tmp_path / ".skynet" / "runs.db")
    outage.down = False
    paid = scripted_server.request_count
    result = skynet.resume(run, SEED, **common)  # the recorded tables: endpoint, budget, engine
    assert result.run_id == run and result.best == BETTER and result.status == "finished", (
        result.report()
    )
    assert scripted_server.request_count > paid


@pytest.mark.slow
def test_a_python_made_run_is_rescored_from_python_and_the_cli_says_how(
    tmp_path, scripted_server, monkeypatch, capsys
):
    scripted_server.responder = task_responder
    monkeypatch.chdir(tmp_path)
    result = skynet.optimize(
        SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        user="Country: {country}",
        **_tables(scripted_server.url),
    )
    paid = scripted_server.request_count

    def strict(input, output, expected=None):  # a new metric: the capital, and brevity
        named = expected["capital"].lower() in output.lower()
        short = len(output) <= 20
        fb = "right" if named and short else f"answer with just {expected['capital']}"
        return float(named and short), {"feedback": fb}

    done = skynet.rescore(result.run_id, metric=strict, data=TRAIN + VAL)
    assert isinstance(done, skynet.runner.RescoreOutcome)
    assert done.rescored == len(_evaluations(result.store / "runs.db")) - done.rescored
    assert (done.items_gone, done.metric_errors) == (0, 0)
    assert scripted_server.request_count == paid  # no task-model call
    # The report now counts the new metric's scores ("Paris" is short, the seed's replies are not).
    assert "+1.000" in result.report()
    assert skynet.rescore(result.run_id, metric=strict, data=TRAIN + VAL).rescored == 0  # current

    # The CLI cannot rerun a Python run without its code: each command says what to call instead.
    capsys.readouterr()
    for argv, says in [
        (["rescore"], f'skynet.rescore("{result.run_id}", metric=score, data=rows'),
        (["eval"], "skynet.evaluate(result.best, metric=score, data=rows"),
        (["run", "--resume", result.run_id], f'skynet.resume("{result.run_id}", seed'),
        (["rescore", result.run_id], f"skynet rescore --run {result.run_id}"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err, err
    assert main(["run"]) == 2  # no run to resume: the ordinary line
    assert "no skynet.toml here; run `skynet init`" in capsys.readouterr().err


def _runs(db) -> list[str]:
    with RunStore(db, readonly=True) as store:
        return [r.id for r in reversed(store.list_runs())]  # in the order recorded


# -- bad input: one clear error, nothing spent ---------------------------------------------------

BAD_CALLS = [
    ("no rows", dict(train=None, val=None), skynet.ConfigError, "no rows; give train= and val="),
    # train= without val= runs, the train rows serving as val (tests/test_valset_none.py).
    ("data with train", dict(val=None, data=TRAIN), skynet.ConfigError, "or train= and val=, not both"),
    ("a row not a dict", dict(train=[1, 2]), skynet.DatasetError, "train[0] is a int"),
    ("a missing column", dict(outputs=["capitol"]), skynet.DatasetError, "train[0]: column 'capitol' is missing (named in outputs="),
    ("an unknown placeholder", dict(user="Land: {land}"), skynet.ConfigError, "user= placeholder {land} names no input column"),
    ("a seed of another type", dict(seed=42), skynet.ConfigError, "the seed is a int"),
    ("an unknown scorer", dict(metric="exactly"), skynet.ConfigError, "exactly"),
    ("a bad budget", dict(budget={"max_metric_calls": 0}), skynet.ConfigError, "budget.max_metric_calls = 0"),
    ("engine as a list", dict(engine=["auto"]), skynet.ConfigError, "engine= is a list"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "change", "error", "says"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS]
)
def test_a_bad_call_is_one_clear_error(tmp_path, scripted_server, case, change, error, says):
    kwargs = dict(
        seed=SEED,
        metric=score,
        train=TRAIN,
        val=VAL,
        inputs=["country"],
        outputs=["capital"],
        store=tmp_path / "s",
        **_tables(scripted_server.url),
    )
    kwargs.update(change)
    with pytest.raises(error) as raised:
        skynet.optimize(kwargs.pop("seed"), **kwargs)
    assert says in str(raised.value), str(raised.value)
    assert "\n" not in str(raised.value)
    assert scripted_server.request_count == 0
