"""The Auto engine: its choices, each with a reason, printed and stored with the run."""

from __future__ import annotations

import json

import pytest
from projects import make_project, never_perfect

from engines.auto import PATIENCE, PROPOSALS, plan
from engines.sampling import BudgetFitted, fit_to_budget
from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path


def _plan(**given):
    """Auto's plan for a light prompt project of 30 train and 8 val items at concurrency 16, with
    what the test gives instead."""
    return plan(
        **{
            "kind": "prompt",
            "level": "light",
            "train": 30,
            "val": 8,
            "minibatch_size": 3,
            "named_scores": False,
            "budget_set_by_user": None,
            "concurrency": 16,
            **given,
        }
    )


@pytest.mark.parametrize(
    ("kind", "level", "named", "user", "engine", "budget", "frontier"),
    [
        ("prompt", "light", False, None, "gepa-async", 8 + 6 * 2 * 3 + (6 * 8) // 3, "instance"),
        ("code", "medium", True, None, "gepa-async", 8 + 15 * 2 * 3 + (15 * 8) // 3, "hybrid"),
        ("dspy", "heavy", False, 99, "dspy-gepa", None, "instance"),
    ],
)
def test_plan_rules(kind, level, named, user, engine, budget, frontier):
    got = _plan(
        kind=kind, level=level, train=8, named_scores=named, budget_set_by_user=user, concurrency=1
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
    # gepa's own loop (dspy-gepa's, and gepa's when a gepa option keeps it) fills the slots with
    # proposals side by side.
    got = _plan(
        kind="dspy",
        train=train,
        concurrency=concurrency,
        options_set=frozenset({"sampling_strategy"} if user_set else ()),
    )
    assert got.sampling == sampling
    assert any(said in reason for reason in got.reasons)
    # Several proposals per iteration: only the best goes on to val, and fewer are made once the
    # budget left cannot pay for them; one proposal (or the user's strategy): gepa's own rules.
    assert got.selection == ("best" if sampling else None)
    assert got.fit_to_budget is (sampling is not None)


def test_a_selection_strategy_the_user_set_wins():
    got = _plan(kind="dspy", options_set=frozenset({"selection_strategy"}))
    assert (got.sampling, got.selection) == ("independent:5", None)
    assert "selection: selection_strategy set in [engine.options]" in got.reasons


@pytest.mark.parametrize(
    ("options_set", "engine", "said"),
    [
        (frozenset(), "gepa-async", "one proposal at a time"),
        (frozenset({"frontier_type", "perfect_score"}), "gepa-async", "one proposal at a time"),
        (frozenset({"max_merge_invocations"}), "gepa", "[engine.options] max_merge_invocations"),
        (frozenset({"sampling_strategy"}), "gepa", "sampling_strategy set in [engine.options]"),
        (frozenset({"custom_candidate_proposer"}), "gepa", "custom_candidate_proposer is set"),
    ],
)
def test_a_prompt_runs_on_gepa_async_unless_a_gepa_option_keeps_gepa_s_loop(
    options_set, engine, said
):
    got = _plan(options_set=options_set)
    assert got.engine == engine
    assert any(said in reason for reason in got.reasons), got.reasons
    if engine == "gepa-async":  # its own proposals: none of gepa's strategies chosen
        assert (got.sampling, got.selection, got.fit_to_budget) == (None, None, False)


@pytest.mark.parametrize(
    ("spent", "proposals"),
    # budget 200, val 16, minibatch 3: each proposal costs 2 x 3, the iteration's best one 16.
    [(16, 5), (154, 5), (155, 4), (172, 2), (178, 1), (190, 1), (250, 1)],
)
def test_proposals_shrink_as_the_budget_runs_out(spent, proposals):
    fitted = BudgetFitted(5, max_metric_calls=200, minibatch=3, val=16)
    assert fitted.proposals(spent) == proposals


def test_only_auto_s_independent_sampling_is_fitted():
    from gepa.strategies.proposal_sampling import IndependentSampling, SameParentSampling

    def fit(strategy, budget=200):
        return fit_to_budget(strategy, max_metric_calls=budget, minibatch=3, val=16)

    assert isinstance(fit(IndependentSampling(5)), BudgetFitted)
    one, same = IndependentSampling(1), SameParentSampling(3)
    assert fit(one) is one and fit(same) is same
    many = IndependentSampling(5)
    assert fit(many, budget=None) is many


@pytest.mark.slow
def test_auto_choices_are_printed_and_recorded(tmp_path, scripted_server, capsys):
    scripted_server.responder = never_perfect  # a perfect best would stop it before the plateau
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
    assert "auto: engine gepa-async for a prompt artifact" in err
    assert "budget 60 metric calls: light" in err  # 8 val + 6 x 2 x 3 + 6 x 8 / 3
    assert "no better val score in 3 proposals" in err and "stopping early" in err
    with RunStore(runs_db_path(project), readonly=True) as store:
        run = store.list_runs()[-1]  # the first recorded
        notes, budget = json.dumps(run.notes), json.dumps(run.budget)
    assert "frontier instance" in notes and "early stop after 3 proposals" in notes
    assert '"max_metric_calls": 60' in budget


@pytest.mark.parametrize(("val", "minibatch"), [(16, 3), (8, 1), (1, 1), (50, 5), (7, 4)])
def test_the_dry_run_inverts_auto_s_budget_formula(val, minibatch):
    # Auto sizes a budget from a number of proposals; the dry run says how many proposals a
    # budget pays for. One formula (skynet.engine) serves both, so they cannot disagree.
    from engines.budget import gepa_metric_calls, gepa_proposals

    for level, n in PROPOSALS.items():
        got = _plan(level=level, train=40, val=val, minibatch_size=minibatch, concurrency=1)
        assert got.max_metric_calls == gepa_metric_calls(n, val=val, minibatch=minibatch)
        assert gepa_proposals(got.max_metric_calls, val=val, minibatch=minibatch) == n
        # one call short of the next proposal still pays for n, not n + 1
        short = gepa_metric_calls(n + 1, val=val, minibatch=minibatch) - 1
        assert gepa_proposals(short, val=val, minibatch=minibatch) == n
    assert gepa_proposals(val, val=val, minibatch=minibatch) == 0  # the seed's val only
