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
    from engines.budget import gepa_proposals

    gepa = capabilities("gepa")
    assert gepa == Capabilities(proposals_for=gepa_proposals)  # gepa's budget arithmetic
    dspy_gepa = capabilities("dspy-gepa")
    assert dspy_gepa.runs_program and dspy_gepa.gepa_options_in == "gepa_kwargs"
    assert dspy_gepa.check_artifact is not None
    assert dspy_gepa.proposals_for is gepa_proposals


def test_auto_is_a_planner_whose_choices_arrive_as_options():
    from skynet.engine import PlanRequest, get_engine, get_planner, is_planner

    assert is_planner("auto") and not is_planner("gepa")
    with pytest.raises(skynet.ConfigError, match="'auto' is a planner that names an engine"):
        get_engine("auto")
    request = PlanRequest(
        kind="prompt",
        level="light",
        train=12,
        val=6,
        minibatch_size=3,
        named_scores=False,
        budget_set_by_user=None,
        concurrency=8,
    )
    planned = get_planner("auto")(request)
    assert planned.engine == "gepa-async" and planned.max_metric_calls and planned.patience == 3
    assert planned.options == {"frontier_type": "instance"}
    # A gepa option gepa-async does not take keeps gepa's loop, with Auto's parallel proposals.
    merged = get_planner("auto")(
        PlanRequest(**{**request.__dict__, "options_set": frozenset({"max_merge_invocations"})})
    )
    assert merged.engine == "gepa"
    assert merged.options == {
        "frontier_type": "instance",
        "sampling_strategy": "independent:2",
        "selection_strategy": "best",
    }
    # An option the user set is never chosen over.
    mine = get_planner("auto")(
        PlanRequest(**{**request.__dict__, "options_set": frozenset({"frontier_type"})})
    )
    assert "frontier_type" not in mine.options


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
