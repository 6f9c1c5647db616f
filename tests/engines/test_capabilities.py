"""Engines declare what the core must know of them (skynet.engine.Capabilities, issue 29): the
core never asks for an engine by its name. dspy-gepa declares that it runs the program itself
(so the executor is not used, said in one line), where gepa's options go (gepa_kwargs), and
which artifacts it refuses; an engine that declares nothing gets the defaults."""

from __future__ import annotations

import pytest
from artifacts.test_dspy_runs import make_dspy_project, responder
from test_python_api import SUM_CODE, _tables, sum_score

import skynet
from skynet.cli import main
from skynet.engine import Capabilities, capabilities


def test_each_engine_says_what_it_is():
    assert capabilities("gepa") == Capabilities()
    dspy_gepa = capabilities("dspy-gepa")
    assert dspy_gepa.runs_program and dspy_gepa.gepa_options_in == "gepa_kwargs"
    assert dspy_gepa.check_artifact is not None


def test_an_engine_refuses_an_artifact_it_cannot_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"id": f"n{n}", "n": n, "total": n * (n + 1) // 2} for n in range(6)]
    tables = {**_tables("http://127.0.0.1:9/v1", budget=30), "engine": {"name": "dspy-gepa"}}
    with pytest.raises(skynet.ConfigError) as raised:
        skynet.optimize(
            skynet.Code(SUM_CODE),
            metric=sum_score,
            train=rows[0::2],
            val=rows[1::2],
            inputs=["n"],
            outputs=["total"],
            **tables,
        )
    assert str(raised.value) == (
        "engine 'dspy-gepa' optimizes DSPy programs and prompts, and [artifact] kind is 'code'; "
        "use engine 'gepa' (or 'auto')"
    )


def test_an_engine_that_runs_the_program_itself_says_the_executor_is_not_used(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = responder
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    flags = ["--engine", "dspy-gepa", "--set", "engine.executor=processes"]
    assert main(["-C", str(project), "run", *flags]) == 0
    assert (
        'executor "processes" is not used by dspy-gepa: it runs the program on its own threads '
        "in this process"
    ) in capsys.readouterr().err
