"""Bad data, third sweep (issue 27): each bad data file is one `skynet: error:` line naming the
file, row and column (exit 2, no traceback, recorded runs left alone); each bad row given in
Python is a typed error naming the argument, row and column, before anything is recorded."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bad_inputs import one_error_line, project, recorded_project, records, refused
from test_python_api import ROWS, TRAIN, VAL, score

import skynet
from skynet.cli import main
from skynet.errors import ConfigError, DatasetError, SkynetError

__all__ = ["project", "recorded_project"]  # the fixtures, imported for pytest to find

DEEP = 100_000


def row_line(number: int, **changes: object) -> Callable[[Path], None]:
    """Rewrite line `number` of data.jsonl with `changes` (a raw JSON text for a value given as
    a `Raw`), the other columns kept."""

    def act(project: Path) -> None:
        path = project / "data.jsonl"
        lines = path.read_text().splitlines()
        row = json.loads(lines[number - 1])
        parts = []
        for key, value in {**row, **changes}.items():
            text = value.text if isinstance(value, Raw) else json.dumps(value)
            parts.append(f"{json.dumps(key)}: {text}")
        lines[number - 1] = "{" + ", ".join(parts) + "}"
        path.write_text("\n".join(lines) + "\n")

    return act


class Raw:
    """A value written into the file as this exact JSON text."""

    def __init__(self, text: str) -> None:
        self.text = text


def toml_outputs(outputs: str) -> Callable[[Path], None]:
    def act(project: Path) -> None:
        toml = project / "skynet.toml"
        text = toml.read_text()
        assert 'outputs = ["capital"]' in text
        toml.write_text(text.replace('outputs = ["capital"]', f"outputs = {outputs}"))

    return act


# (case, how data.jsonl or skynet.toml is broken, the command, what the one line must say)
FILES = [
    (
        "lone surrogate escape",
        row_line(3, country=Raw('"Peru \\ud800"')),
        ["check"],
        ["data.jsonl:3: column 'country' (data.inputs)", "lone surrogate \\ud800"],
    ),
    (
        "nested 100000 deep",
        row_line(2, country=Raw("[" * DEEP + "]" * DEEP)),
        ["check"],
        ["data.jsonl:2: ", "nested too deeply"],
    ),
    (
        "id true",
        row_line(4, id=True),
        ["run"],
        ["data.jsonl:4: column 'id': the id is true", "non-empty string or number"],
    ),
    (
        "Infinity in an input",
        row_line(1, country=Raw("Infinity")),
        ["check"],
        ["data.jsonl:1: column 'country' (data.inputs): Infinity"],
    ),
    (
        "outputs names an input",
        toml_outputs('["capital", "country"]'),
        ["check"],
        ["skynet.toml: data.outputs names 'country', which data.inputs names too"],
    ),
    (
        "NaN in an expected column",
        row_line(5, capital=Raw("NaN")),
        ["run"],
        ["data.jsonl:5: column 'capital' (data.outputs): NaN", "drop the row"],
    ),
]


@pytest.mark.parametrize(("case", "act", "command", "needles"), FILES, ids=[c[0] for c in FILES])
def test_a_bad_data_file_is_one_line(project, capsys, case, act, command, needles):
    line = refused(project, capsys, act, command)
    for needle in needles:
        assert needle in line
    assert "metric" not in line.removeprefix("skynet: error: ")  # the data is blamed, not score()


def bounded(call: Callable[[], object], fifo: Path, seconds: float = 15) -> object:
    """call()'s result, failing (and unblocking it) when it is still running after `seconds`."""
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer comes and goes: EOF
        worker.join(5)
        pytest.fail(f"still reading the FIFO {fifo} after {seconds} s")
    assert done, "the call raised"
    return done[0]


def test_a_fifo_as_data_file_is_refused_not_waited_on(project, capsys):
    before = records(project)
    data = project / "data.jsonl"
    data.unlink()
    os.mkfifo(data)
    capsys.readouterr()
    assert bounded(lambda: main(["-C", str(project), "check"]), data) == 2
    line = one_error_line(capsys)
    assert "data.jsonl: is a named pipe (FIFO), not a data file (data.path in skynet.toml)" in line
    assert records(project) == before


# -- rows given in Python --------------------------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def with_value(index: int, column: str, value: object, rows: list[dict] = ROWS) -> list[dict]:
    rows = [dict(row) for row in rows]
    rows[index][column] = value
    return rows


def frame(rows: list[dict], columns: list[str] | None = None):
    pandas = pytest.importorskip("pandas", reason="pandas is not installed")
    df = pandas.DataFrame(rows)
    if columns is not None:
        df.columns = columns
    return df


# (case, the data= value (a function: a DataFrame needs pandas), extra arguments, the error,
# what its one line must say)
PY_ROWS = [
    (
        "lone surrogate",
        lambda: with_value(2, "country", "Peru \ud800"),
        {},
        DatasetError,
        ["data[2]: column 'country' (inputs=)", "lone surrogate \\ud800"],
    ),
    (
        "nested 100000 deep",
        lambda: with_value(0, "country", nested(DEEP)),
        {},
        DatasetError,
        ["data[0]: column 'country' (inputs=)", "nested more than"],
    ),
    (
        "id true",
        lambda: with_value(1, "id", True),
        {},
        DatasetError,
        ["data[1]: column 'id': the id is true"],
    ),
    (
        "Infinity in an input",
        lambda: with_value(3, "country", math.inf),
        {},
        DatasetError,
        ["data[3]: column 'country' (inputs=): Infinity"],
    ),
    (
        "a set as an input",
        lambda: with_value(1, "country", {"France"}),
        {},
        DatasetError,
        ["data[1]: column 'country' (inputs=): a Python set", "sorted("],
    ),
    (
        "bytes as an input",
        lambda: with_value(1, "country", b"France"),
        {},
        DatasetError,
        ["data[1]: column 'country' (inputs=): bytes is not text", ".decode("],
    ),
    (
        "DataFrame NaN in the output column",
        lambda: frame(with_value(4, "capital", math.nan)),
        {},
        DatasetError,
        ["data[4]: column 'capital' (outputs=): NaN"],
    ),
    (
        "DataFrame duplicate column names",
        lambda: frame(ROWS, ["id", "capital", "capital"]),
        {},
        DatasetError,
        ["data=: column 'capital' appears twice in the DataFrame"],
    ),
    (
        "outputs names an input",
        lambda: ROWS,
        {"outputs": ["capital", "country"]},
        ConfigError,
        ["skynet.evaluate(): outputs= names 'country', which inputs= names too"],
    ),
    (
        "data empty",
        lambda: [],
        {"outputs": None},
        ConfigError,
        ["skynet.evaluate(): data= holds no rows"],
    ),
    (
        "data None",
        lambda: None,
        {"outputs": None},
        ConfigError,
        ["skynet.evaluate(): data= is None"],
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "data", "extra", "error", "needles"), PY_ROWS, ids=[c[0] for c in PY_ROWS]
)
def test_bad_rows_in_evaluate_are_a_typed_error(
    tmp_path, scripted_server, monkeypatch, case, data, extra, error, needles
):
    monkeypatch.chdir(tmp_path)
    arguments = {"inputs": ["country"], "outputs": ["capital"], "user": "Country: {country}"}
    with pytest.raises(error) as caught:
        skynet.evaluate(
            "Name the capital.",
            metric=score,
            data=data(),
            store=tmp_path / ".skynet",
            models=_models(scripted_server.url),
            **{**arguments, **extra},
        )
    message = str(caught.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message
    assert "optimize" not in message and "test[" not in message  # the call and argument given
    assert not (tmp_path / ".skynet" / "runs.db").exists()


def _models(url: str) -> dict:
    return {
        "task": "openai/skynet-test",
        "endpoints": {"openai/skynet-test": {"api_base": url, "timeout_s": 10}},
    }


# (case, the rows for train=, what the error must say)
OPTIMIZE_ROWS = [
    ("lone surrogate", with_value(4, "country", "\udfff", TRAIN), "train[4]: column 'country'"),
    ("NaN expected", with_value(2, "capital", math.nan, TRAIN), "train[2]: column 'capital'"),
]


@pytest.mark.parametrize(
    ("case", "train", "needle"), OPTIMIZE_ROWS, ids=[c[0] for c in OPTIMIZE_ROWS]
)
def test_bad_rows_in_optimize_are_a_typed_error(
    tmp_path, scripted_server, monkeypatch, case, train, needle
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetError) as caught:
        skynet.optimize(
            "Name the capital.",
            metric=score,
            train=train,
            val=VAL,
            inputs=["country"],
            outputs=["capital"],
            user="Country: {country}",
            store=tmp_path / ".skynet",
            models=_models(scripted_server.url),
        )
    assert needle in str(caught.value)
    assert not (tmp_path / ".skynet" / "runs.db").exists()


def test_a_fifo_as_data_path_in_python_is_refused_not_waited_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fifo = tmp_path / "rows.jsonl"
    os.mkfifo(fifo)

    def call() -> object:
        try:
            skynet.evaluate("x", metric=score, data=str(fifo), inputs=["country"])
        except SkynetError as exc:
            return exc
        return None

    error = bounded(call, fifo)
    assert isinstance(error, DatasetError)
    assert "rows.jsonl: is a named pipe (FIFO), not a data file (data= of the call)" in str(error)
