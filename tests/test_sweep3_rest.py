"""Issue 27, what the sweep left after the first pass: argparse's refusals as one `skynet: error:`
line, an `async def score`, a damaged score in the run store, a model name with no provider, and
RunResult.to_html's guard (the one `show --html` has)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap

import pytest
from projects import make_project, task_responder
from test_bad_inputs import one_error_line
from test_python_api import _tables

import skynet
from skynet.cli import main
from skynet.errors import ConfigError
from skynet.runs import RunStore

# -- argparse: one line, naming the subcommand's --help ------------------------------------

# (argv, what the one line must say)
ARGS = [
    (["bogus"], ["argument COMMAND: invalid choice: 'bogus'", "`skynet --help`"]),
    ([], ["the following arguments are required: COMMAND", "`skynet --help`"]),
    (["-C"], ["argument -C: expected one argument", "`skynet --help`"]),
    (["run", "--bogus"], ["unrecognized arguments: --bogus", "`skynet run --help`"]),
    (["run", "--seed", "x"], ["argument --seed: invalid int value: 'x'", "`skynet run --help`"]),
    (["eval", "--split", "nope"], ["invalid choice: 'nope'", "`skynet eval --help`"]),
    (["export"], ["required: TARGET", "`skynet export --help`"]),
    (["export", "mlflow", "--x"], ["unrecognized arguments: --x", "`skynet export mlflow --help`"]),
    (["judge", "validate"], ["required: --labels", "`skynet judge validate --help`"]),
]


@pytest.mark.parametrize("argv, said", ARGS, ids=[" ".join(a) or "nothing" for a, _ in ARGS])
def test_argparse_refusals_are_one_line(argv, said, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("skynet: error: ")
    for text in said:
        assert text in line


# -- an async score(): awaited, as inspect_ai's scorers are ----------------------------------

ASYNC_METRIC = """
import asyncio

async def score(input, output, expected=None):
    await asyncio.sleep(0)
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else "name the capital"}
"""


@pytest.mark.slow
def test_an_async_score_is_awaited_from_a_project(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    (project / "metric.py").write_text(textwrap.dedent(ASYNC_METRIC))
    assert main(["-C", str(project), "check"]) == 0, capsys.readouterr()
    assert main(["-C", str(project), "run"]) == 0
    with RunStore(project / ".skynet" / "runs.db", readonly=True) as store:
        run = store.list_runs()[0]
        scores = [e.score for e in store.evaluations(run.id)]
    assert scores and set(scores) <= {0.0, 1.0} and 1.0 in scores  # the awaited values


def test_an_async_score_is_awaited_from_python_and_under_a_running_loop():
    import asyncio

    from skynet.contract import Metric

    async def score(input, output, expected=None):
        await asyncio.sleep(0)
        return float(output == expected), {"feedback": "ok"}

    metric = Metric(score, name="async")
    assert metric({"q": 1}, "a", "a").score == 1.0

    async def inside_a_loop():  # a notebook's cell runs in one
        return metric({"q": 1}, "a", "b").score

    assert asyncio.run(inside_a_loop()) == 0.0


# -- a damaged score in the run store: one line naming the run and the item -------------------


@pytest.mark.slow
def test_a_damaged_score_names_the_run_and_the_item(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    db = project / ".skynet" / "runs.db"
    with sqlite3.connect(db) as c:
        (item,) = c.execute("SELECT item_id FROM evaluations ORDER BY seq LIMIT 1").fetchone()
        c.execute("UPDATE evaluations SET score = 'high' WHERE item_id = ?", (item,))
    run_id = RunStore(db, readonly=True).list_runs()[0].id
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 2
    line = one_error_line(capsys)
    assert f"the record of run {run_id} is damaged: the evaluation of item '{item}'" in line
    assert "its score is 'high', not a number" in line
    assert main(["-C", str(project), "runs"]) == 0  # the list still reads


# -- a model name litellm cannot route: refused before any call -----------------------------


@pytest.mark.parametrize("name", ["gpt-nothing", "nosuchprovider/model-x"])
def test_a_model_with_no_provider_is_refused_before_any_call(
    name, tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    capsys.readouterr()
    assert main(["-C", str(project), "run", "--task-model", name]) == 2
    line = one_error_line(capsys)
    assert line.startswith(f"skynet: error: the task model '{name}' names no provider litellm")
    assert "PROVIDER/MODEL" in line
    assert scripted_server.request_count == 0
    assert RunStore(project / ".skynet" / "runs.db").list_runs() == []


# -- RunResult.to_html: the guard `show --html` has --------------------------------------------

ROWS = [{"id": f"r{i}", "country": c, "capital": c.upper()} for i, c in enumerate("abcdefgh")]


def _score(input, output, expected=None):
    return float(expected["capital"] in output), {"feedback": "say the capital"}


@pytest.mark.slow
def test_to_html_refuses_the_store_and_a_file_it_did_not_write(tmp_path, scripted_server):
    scripted_server.responder = task_responder
    store = tmp_path / "s"
    result = skynet.optimize(
        "Tell the user about the country.",
        metric=_score,
        train=ROWS[0::2],
        val=ROWS[1::2],
        inputs=["country"],
        outputs=["capital"],
        user="Country: {country}",
        store=store,
        **_tables(scripted_server.url, budget=12),
    )
    runs_db = store / "runs.db"
    before = runs_db.read_bytes()
    with pytest.raises(ConfigError, match="a database Skynet keeps its records in"):
        result.to_html(runs_db)
    with pytest.raises(ConfigError, match="a database Skynet keeps its records in"):
        result.to_html(runs_db, force=True)  # never, even when asked
    assert runs_db.read_bytes() == before
    mine = tmp_path / "notes.html"
    mine.write_text("<p>my own page</p>")
    with pytest.raises(ConfigError, match=r"not a page Skynet wrote; .* or add force=True"):
        result.to_html(mine)
    assert mine.read_text() == "<p>my own page</p>"
    page = result.to_html(tmp_path / "report.html")
    assert result.to_html(page) == page  # its own page: written again
    assert result.to_html(mine, force=True) == mine
    with pytest.raises(ConfigError, match="an empty path"):
        result.to_html("")
    shutil.rmtree(store)


# -- a null input: empty text in the prompt, noted by check -------------------------------


def test_a_null_input_goes_in_as_empty_text_and_check_says_so(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    data = project / "data.jsonl"
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    rows[1]["country"] = None
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["-C", str(project), "check"]) == 0
    out = capsys.readouterr().out
    assert (
        f"note: item '{rows[1]['id']}' has a null in column 'country', which the prompt's user "
        "section puts in the message: it goes in as empty text"
    ) in out
    assert main(["-C", str(project), "eval", "--candidate", "seed", "--split", "val"]) == 0
    users = [b["messages"][-1]["content"] for b in scripted_server.requests]
    assert "Country: " in users and "Country: None" not in users
