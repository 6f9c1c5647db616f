"""The Auto engine: its choices, each with a reason, printed and stored with the run."""

from __future__ import annotations

import sqlite3

import pytest
from projects import make_project, task_responder

from engines.auto import PATIENCE, PROPOSALS, plan
from skynet.cli import main


@pytest.mark.parametrize(
    ("kind", "level", "named", "user", "engine", "budget", "frontier"),
    [
        ("prompt", "light", False, None, "gepa", 8 + 6 * 2 * 3 + (6 * 8) // 3, "instance"),
        ("code", "medium", True, None, "gepa", 8 + 15 * 2 * 3 + (15 * 8) // 3, "hybrid"),
        ("dspy", "heavy", False, 99, "dspy-gepa", None, "instance"),
    ],
)
def test_plan_rules(kind, level, named, user, engine, budget, frontier):
    got = plan(
        kind=kind,
        level=level,
        train=8,
        val=8,
        minibatch_size=3,
        named_scores=named,
        budget_set_by_user=user,
    )
    assert (got.engine, got.max_metric_calls, got.frontier) == (engine, budget, frontier)
    assert got.patience == PATIENCE[level] and PROPOSALS[level] > 0
    assert len(got.reasons) == 5 and all(r for r in got.reasons)


@pytest.mark.parametrize(
    ("concurrency", "train", "user_set", "sampling", "said"),
    [
        (16, 30, False, "independent:5", "concurrency 16 // minibatch 3 = 5"),
        (16, 8, False, "independent:2", "held to train 8 // minibatch 3 = 2"),
        (4, 30, False, None, "concurrency 4 // minibatch 3 = 1"),
        (16, 2, False, None, "held to train 2 // minibatch 2 = 1"),
        (16, 30, True, None, "sampling_strategy set in [engine.options]"),
    ],
)
def test_parallel_proposals_fill_the_evaluation_slots(concurrency, train, user_set, sampling, said):
    got = plan(
        kind="prompt",
        level="light",
        train=train,
        val=8,
        minibatch_size=3,
        named_scores=False,
        budget_set_by_user=None,
        concurrency=concurrency,
        sampling_set_by_user=user_set,
    )
    assert got.sampling == sampling
    assert said in got.reasons[-1]


def test_auto_choices_are_printed_and_recorded(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    # No budget in the file: auto sets it from the level and the split sizes.
    toml.write_text(
        toml.read_text()
        .replace('name = "gepa"', 'name = "auto"')
        .replace("[budget]\nmax_metric_calls = 40\n", "")
    )
    assert "max_metric_calls" not in toml.read_text()
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    assert "auto: engine gepa for a prompt artifact" in err
    assert "budget 60 metric calls: light" in err  # 8 val + 6 x 2 x 3 + 6 x 8 / 3
    assert "no better val score in 3 proposals" in err and "stopping early" in err
    with sqlite3.connect(project / ".skynet" / "runs.db") as db:
        notes, budget = db.execute("SELECT notes, budget FROM runs").fetchone()
    assert "frontier instance" in notes and "early stop after 3 proposals" in notes
    assert '"max_metric_calls": 60' in budget
