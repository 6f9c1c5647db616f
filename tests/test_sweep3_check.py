"""Bad inputs, third sweep (issue 27): skynet.toml values of the wrong type, a prompt whose user
template lets no input through, a metric.py that hangs or ends the process at import, an unknown
scorer for `skynet selftest`, a bad `judge validate --B`, and a Python out= that is no stream.
Each is one `skynet: error:` line (exit 2) or a typed error at the call, before any model call,
with the runs already recorded left as they were."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from projects import COUNTRIES, make_project, task_responder
from test_bad_inputs import append_to_toml, one_error_line, records, replace_in_toml

import skynet
from skynet.cli import main
from skynet.errors import ConfigError
from skynet.testing import ScriptedServer

ENDPOINT = '"openai/skynet-test"'


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    """The loopback model server, up for the module: the recorded project's copies reach it."""
    with ScriptedServer(responder=task_responder) as started:
        yield started


@pytest.fixture(scope="module")
def recorded_project(server: ScriptedServer, tmp_path_factory) -> Path:
    """A project with one finished run, made once."""
    from skynet.models import client

    project = make_project(tmp_path_factory.mktemp("recorded") / "p", server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    if client._global is not None:  # the run's model session: not left to the next test
        client._global.close()
        client._global = None
    return project


@pytest.fixture
def project(recorded_project: Path, tmp_path: Path) -> Path:
    """A copy of the recorded project, its run included, for one test to break."""
    copy = tmp_path / "p"
    shutil.copytree(recorded_project, copy)
    return copy


def replace(old: str, new: str) -> Callable[[Path], None]:
    return lambda project: replace_in_toml(project, old, new)


def append(text: str) -> Callable[[Path], None]:
    return lambda project: append_to_toml(project, text)


def write(name: str, text: str) -> Callable[[Path], None]:
    return lambda project: (project / name).write_text(text)


def metric_head(head: str) -> Callable[[Path], None]:
    """metric.py with `head` run at import, before the project's score()."""

    def act(project: Path) -> None:
        metric = project / "metric.py"
        metric.write_text(head + metric.read_text())

    return act


def both(*acts: Callable[[Path], None]) -> Callable[[Path], None]:
    def act(project: Path) -> None:
        for one in acts:
            one(project)

    return act


# (case, how the project is broken, the command's arguments after -C DIR, what the line says)
REFUSED = [
    (
        "engine.concurrency a string",
        replace("concurrency = 2", 'concurrency = "8"'),
        ["check"],
        ['skynet.toml: engine.concurrency = "8" is invalid', "set it to an integer >= 1"],
    ),
    (
        "a price a string",
        replace("input_per_mtok = 1.0", 'input_per_mtok = "1.0"'),
        ["check"],
        [f'models.prices.{ENDPOINT}.input_per_mtok = "1.0" is invalid', "a number >= 0"],
    ),
    (
        "an endpoint's timeout_s a string",
        replace("timeout_s = 10", 'timeout_s = "10"'),
        ["check"],
        [f'models.endpoints.{ENDPOINT}.timeout_s = "10" is invalid', "a number of seconds > 0"],
    ),
    (
        "budget.max_metric_calls a string",
        replace("max_metric_calls = 20", 'max_metric_calls = "20"'),
        ["run"],
        ['budget.max_metric_calls = "20" is invalid', "an integer >= 1"],
    ),
    (
        "metric.time_s a string",
        append('\n[metric]\ntime_s = "5"\n'),
        ["check"],
        ['metric.time_s = "5" is invalid', "a number > 0"],
    ),
    (
        "a scorer package's number a string",
        append('\n[judge]\ninstructions = "Same city?"\nmax_tokens = "64"\n'),
        ["check"],
        ['judge.max_tokens = "64" is invalid', "an integer >= 1"],
    ),
    (
        "an integer key given a fraction",
        replace("concurrency = 2", "concurrency = 2.5"),
        ["check"],
        ["engine.concurrency = 2.5 is invalid", "an integer >= 1"],
    ),
    (
        "--set with a quoted number",
        lambda project: None,
        ["check", "--set", 'engine.seed="3"'],
        ['--set engine.seed="3": engine.seed = "3" is invalid', "set it to an integer"],
    ),
    (
        "an empty user section",
        write("prompt.md", "=== instructions ===\nTell me.\n=== user ===\n"),
        ["check"],
        [
            "prompt.md:3: the 'user' section is empty, so no item's input reaches the model",
            "{country}",
        ],
    ),  # fmt: skip
    (
        "a user section with no placeholder",
        write("prompt.md", "=== instructions ===\nTell me.\n=== user ===\nA country, please.\n"),
        ["run"],
        ["prompt.md:3: the 'user' section names no input column", "such as {country}"],
    ),
    (
        "metric.py ends the process at import",
        metric_head("import os\nos._exit(0)\n"),
        ["check"],
        ["metric.py: importing the metric ended the process (exit code 0)", "import cleanly"],
    ),
    (
        "metric.py kills itself at import",
        metric_head("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"),
        ["run"],
        ["metric.py: importing the metric ended the process (signal SIGKILL)"],
    ),
    (
        "metric.py loops forever at import",
        both(metric_head("while True:\n    pass\n"), append("\n[metric]\nimport_time_s = 1\n")),
        ["check"],
        [
            "metric.py: importing the metric took longer than 1 s (metric.import_time_s)",
            "raise metric.import_time_s",
        ],
    ),  # fmt: skip
    (
        "judge validate --B -1",
        append('\n[judge]\ninstructions = "Does the output name the same capital?"\n'),
        ["judge", "validate", "--labels", "labels.jsonl", "--B", "-1"],
        ["--B -1: give an integer >= 1 (bootstrap resamples)"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "act", "command", "needles"), REFUSED, ids=[c[0] for c in REFUSED]
)
def test_a_bad_input_is_one_line_before_any_model_call(
    project, server, capsys, case, act, command, needles
):
    labelled = [
        {"id": f"c{i}", "input": {"country": country}, "output": capital, "reference": capital,
         "human": True}
        for i, (country, capital) in enumerate(COUNTRIES[:6])
    ]  # fmt: skip
    (project / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labelled))
    before, calls = records(project), server.request_count
    act(project)
    capsys.readouterr()
    started = time.monotonic()
    assert main(["-C", str(project), *command]) == 2
    assert time.monotonic() - started < 20  # bounded: an endless import is cut off
    line = one_error_line(capsys)
    for needle in needles:
        assert needle in line
    assert server.request_count == calls  # refused before any model call
    assert records(project) == before


@pytest.mark.slow
def test_an_empty_instructions_seed_passes_check_with_a_note(project, capsys):
    # An empty seed is legitimate for reflective optimisation (the reflection writes the text
    # from the feedback) but rarely meant: `check` passes and says so.
    (project / "prompt.md").write_text("=== instructions ===\n\n=== user ===\nCountry: {country}\n")
    capsys.readouterr()
    assert main(["-C", str(project), "check"]) == 0
    out = capsys.readouterr().out
    assert "note: the seed's 'instructions' is empty" in out
    assert "write a first version to start from it" in out


def test_a_metric_that_imports_cleanly_passes_the_import_probe(project, capsys):
    # The probe says nothing of a good metric, and what metric.py raises at import is still
    # reported by the import itself, with its line.
    capsys.readouterr()
    assert main(["-C", str(project), "check"]) == 0
    assert "metric loaded (score/3)" in capsys.readouterr().out
    metric_head("import sys\nsys.exit(4)\n")(project)
    assert main(["-C", str(project), "check"]) == 2
    assert "metric.py:2: importing the metric called sys.exit(4)" in one_error_line(capsys)


# (case, the scorer named, what the line must say)
SCORERS = [
    ("unknown scorer", "no-such-scorer", ["no scorer named 'no-such-scorer'", "known scorers: "]),
    ("misspelt scorer", "exakt", ["no scorer named 'exakt'", "exact", "xlam-tool-call"]),
]


@pytest.mark.parametrize(("case", "name", "needles"), SCORERS, ids=[c[0] for c in SCORERS])
def test_selftest_of_an_unknown_scorer_names_it_and_the_known_ones(
    tmp_path, capsys, case, name, needles
):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"id": "r1", "query": "q"}) + "\n")  # no "answers" column
    assert main(["selftest", name, "--data", str(data)]) == 2
    line = one_error_line(capsys)
    for needle in needles:
        assert needle in line
    assert "column 'answers' is missing" not in line


ROWS = [{"id": f"c{i}", "country": c, "capital": k} for i, (c, k) in enumerate(COUNTRIES)]


def _score(input, output, expected=None):
    return float(expected["capital"] in output), {"feedback": "name the capital"}


def _tables(url: str) -> dict:
    return {
        "models": {
            "task": "openai/skynet-test",
            "reflection": "openai/skynet-test",
            "endpoints": {"openai/skynet-test": {"api_base": url}},
        },
        "engine": {"name": "gepa"},
        "budget": {"max_metric_calls": 20},
    }


# (case, keyword arguments over a good call, the error, what its message must say)
PYTHON = [
    (
        "out= an int",
        {"out": 5},
        ConfigError,
        ["skynet.optimize(): out=5 is not a text stream (int has no write())"],
    ),
    (
        "out= a file name",
        {"out": "file.txt"},
        ConfigError,
        ["skynet.optimize(): out='file.txt' is not a text stream", 'open("progress.log", "w")'],
    ),
    (
        "engine concurrency a string",
        {"engine": {"name": "gepa", "concurrency": "8"}},
        ConfigError,
        ['skynet.optimize(): engine.concurrency = "8" is invalid', "an integer >= 1"],
    ),
    (
        "user= with no placeholder",
        {"user": "Name a capital."},
        ConfigError,
        ["skynet.optimize(): user= names no input column", "such as {country}"],
    ),
]


@pytest.mark.parametrize(("case", "given", "error", "needles"), PYTHON, ids=[c[0] for c in PYTHON])
def test_a_bad_python_argument_is_a_typed_error_at_the_call(
    tmp_path, monkeypatch, server, case, given, error, needles
):
    monkeypatch.chdir(tmp_path)
    calls = server.request_count
    call = {
        "metric": _score,
        "train": ROWS[0::2],
        "val": ROWS[1::2],
        "inputs": ["country"],
        "outputs": ["capital"],
        **_tables(server.url),
        **given,
    }
    with pytest.raises(error) as raised:
        skynet.optimize("Tell the user about the country.", **call)
    for needle in needles:
        assert needle in str(raised.value)
    assert server.request_count == calls
    assert not (tmp_path / ".skynet" / "runs.db").exists()


def test_evaluate_refuses_an_out_that_is_no_stream_at_the_call(tmp_path, monkeypatch, server):
    # evaluate() shows progress as optimize() does: out= not a stream is refused, naming it.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"skynet\.evaluate\(\): out=5 is not a text stream"):
        skynet.evaluate(  # type: ignore[arg-type]
            "Tell the user about the country.",
            metric=_score,
            data=ROWS,
            inputs=["country"],
            outputs=["capital"],
            models=_tables(server.url)["models"],
            out=5,
        )
    assert not (tmp_path / ".skynet").exists()
