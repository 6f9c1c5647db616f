"""Candidates are the pool, as gepa and dspy.GEPA count them (issue 28): the seed and those scored
on val; a proposal rejected on its minibatch is listed apart (and badged in the viewer)."""

from __future__ import annotations

import itertools

import pytest
from projects import BETTER, capital_responder, make_project

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.report import in_pool, summarize
from skynet.testing import is_reflection, reply
from skynet.view.pages import candidates_html

pytestmark = pytest.mark.slow


def _worse_then_better():
    """Its first two proposals make the answers worse (rejected on the minibatch); the third
    names the capital (accepted)."""
    task = capital_responder()
    drafts = itertools.count()

    def respond(body):
        if is_reflection(body["messages"][-1]["content"]):
            n = next(drafts)
            text = BETTER if n >= 2 else f"Answer with one word: no. ({n})"
            return reply(f"```\n{text}\n```")
        return task(body)

    return respond


def test_rejected_proposals_are_not_counted_as_candidates(tmp_path, scripted_server, capsys):
    scripted_server.responder = _worse_then_better()
    project = make_project(tmp_path / "p", scripted_server.url, budget=60)
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    store = RunStore(project / ".skynet" / "runs.db", readonly=True)
    run = store.list_runs()[0]
    s = summarize(store, run.id)
    pool = [c for c in s.candidates if in_pool(s, c)]
    rejected = [c for c in s.candidates if not in_pool(s, c)]
    assert len(pool) == 2 and len(rejected) == 2  # the seed and BETTER; the two worse drafts
    assert all(c.val_score is None for c in rejected)
    assert main(["-C", str(project), "show", run.id]) == 0
    out = capsys.readouterr().out
    assert "Candidates (2: the seed and those scored on val, the pool)" in out
    assert "Proposals rejected on their minibatch (2, not in the pool)" in out
    page = "".join(candidates_html(store, s, None, None, live=False))
    # each rejected one badged twice (in the lineage and on its card), no candidate of the pool
    assert page.count('<span class="tag">rejected</span>') == 2 * len(rejected)
