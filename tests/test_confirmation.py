"""The confirmation, end to end on the loopback server: after the search, the seed and the best
are scored on every test item, and the run's headline is the paired gain there (skynet.gain).

The scripted model's right answers follow a rule per split: with `TRANSFERS` it names the capital
whenever the instruction asks for one (a real gain, on test as on val); with `OVERFITS` only for
the countries the search saw (train and val): a val win that does not carry over to the items
that chose nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import BETTER, COUNTRIES, capital_responder, make_project

from skynet.cli import main
from skynet.runs import RunStore
from skynet.runs.report import NO_TEST_SPLIT, summarize
from skynet.runs.store import runs_db_path
from skynet.testing import is_reflection, reply

TRAIN, VAL, TEST = COUNTRIES[:6], COUNTRIES[6:10], COUNTRIES[10:]
SEEN = {country for country, _ in TRAIN + VAL}


TRANSFERS = capital_responder()
OVERFITS = capital_responder(lambda country: country in SEEN)


def _project(
    tmp_path: Path, url: str, *, test: bool = True, budget: str = "", engine: str = ""
) -> Path:
    """The capitals project on 6 train / 4 val / 6 test items (no test: without them), with
    `budget` and `engine` lines added to those tables."""
    project = make_project(tmp_path / "p", url, budget=30)
    rows = [(c, cap, "train") for c, cap in TRAIN] + [(c, cap, "val") for c, cap in VAL]
    rows += [(c, cap, "test") for c, cap in TEST] if test else []
    with open(project / "data.jsonl", "w") as f:
        for i, (country, capital, split) in enumerate(rows):
            row = {"id": f"c{i}", "country": country, "capital": capital, "split": split}
            f.write(json.dumps(row) + "\n")
    toml = project / "skynet.toml"
    text = toml.read_text()
    if budget:
        text = text.replace("max_metric_calls = 30", f"max_metric_calls = 30\n{budget}")
    if engine:
        text = text.replace('name = "gepa"', f'name = "gepa"\n{engine}')
    toml.write_text(text)
    return project


def _summary(project: Path):
    with RunStore(runs_db_path(project)) as store:
        return summarize(store, store.latest_run().id)


@pytest.mark.slow
def test_a_real_gain_is_confirmed_on_the_test_items(tmp_path, scripted_server, capsys):
    scripted_server.responder = TRANSFERS
    project = _project(tmp_path, scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    captured = capsys.readouterr()
    assert "confirming: the seed and the best on 6 test items" in captured.err
    s = _summary(project)
    assert s.confirmation == {"state": "done", "items": 6, "calls": 12}
    gain = s.gain
    assert gain is not None and gain.split == "test" and gain.n == 6
    assert gain.estimate == 1.0 and gain.a_mean == 0.0 and gain.b_mean == 1.0
    assert gain.verdict == "better" and gain.p_value == 2 * 0.5**6  # McNemar: 6 of 6 changed
    assert gain.method.startswith("McNemar's exact test")
    assert gain.val_estimate == 1.0
    # The confirmation's calls are counted apart from the search's, which kept its budget.
    assert s.confirmation_calls == 12 and s.metric_calls <= 30
    out = captured.out
    assert "Gain on held-out test items (best - seed, paired): +1.000" in out
    assert "on 6 test items, p = 0.031: better" in out
    assert f"search {s.metric_calls} of 30, confirmation 12 (test)" in out
    # The headline comes before the score table: the first figure a user reads.
    assert out.index("Gain on held-out") < out.index("Scores (")


@pytest.mark.slow
def test_a_val_win_that_does_not_carry_over_is_not_called_better(tmp_path, scripted_server, capsys):
    scripted_server.responder = OVERFITS
    project = _project(tmp_path, scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    s = _summary(project)
    assert s.best is not None and s.seed is not None and s.best.id != s.seed.id
    assert s.best.val_score == 1.0 and s.seed.val_score == 0.0  # the val figure: +1.000
    gain = s.gain
    assert gain is not None and gain.n == 6 and gain.estimate == 0.0
    assert gain.verdict == "no difference detected" and gain.p_value == 1.0
    assert "no difference detected (this split detects gains of" in out
    assert "val gain +1.000, on the items that chose the best" in out
    assert "shrinkage val to test +1.000" in out


def test_no_test_split_is_said(tmp_path, scripted_server, capsys):
    scripted_server.responder = TRANSFERS
    project = _project(tmp_path, scripted_server.url, test=False)
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    s = _summary(project)
    assert s.gain is None and s.confirmation == {"state": "no test split"}
    assert f"Gain: +1.000 on val; {NO_TEST_SPLIT}" in out
    assert "no test split: the val figure chose the best and overstates it" in out


def test_confirm_false_turns_it_off_and_says_so(tmp_path, scripted_server, capsys):
    scripted_server.responder = TRANSFERS
    project = _project(tmp_path, scripted_server.url, budget="confirm = false")
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    s = _summary(project)
    assert s.gain is None and s.confirmation_calls == 0
    assert s.confirmation == {"state": "off", "items": 6}
    assert "not confirmed ([budget] confirm = false)" in out
    with RunStore(runs_db_path(project), readonly=True) as store:
        assert len(store.evaluations(s.run.id, split="test")) == 0


def test_a_string_for_confirm_is_refused_in_one_line(tmp_path, scripted_server, capsys):
    project = _project(tmp_path, scripted_server.url, budget='confirm = "yes"')
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err
    assert "confirm" in err and "true or false" in err and "Traceback" not in err


def test_the_search_cannot_spend_the_confirmations_money(tmp_path, scripted_server, capsys):
    """Under max_cost_usd the confirmation's worst case is set aside before the search: a
    reflection call that the limit alone would let through is refused for it, and the
    confirmation still scores every test item within the limit."""
    scripted_server.responder = TRANSFERS
    # Prices $1 / $2 per million tokens: a task call's worst case is about $0.0007 (256 output
    # tokens), 12 of them about $0.008 set aside; a reflection call's about $0.01 (4,096).
    project = _project(tmp_path, scripted_server.url, budget="max_cost_usd = 0.012")
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    assert "of max_cost_usd set aside for the confirmation" in err
    s = _summary(project)
    assert "set aside for the confirmation" in s.run.notes["stopped_by"]
    assert s.confirmation["state"] == "done" and s.gain is not None and s.gain.n == 6
    with RunStore(runs_db_path(project)) as store:
        run = store.latest_run()
        spent = sum(t.cost_usd for t in store.cost_by_role(run.id).values())
    assert spent <= 0.012


# -- [engine] select = "holdout" ------------------------------------------------------------------
def _holdout(top: int = 2) -> str:
    return f'select = "holdout"\nselect_top = {top}'


def test_the_selection_split_is_carved_from_val_by_a_seeded_hash():
    from skynet.data import Item
    from skynet.session import carve_selection

    val = [Item(id=f"v{i}", input={}, expected=None) for i in range(9)]
    search, chosen = carve_selection(val, seed=0)
    assert len(chosen) == 4 and len(search) == 5
    assert {i.id for i in search} | {i.id for i in chosen} == {i.id for i in val}
    again = carve_selection(list(reversed(val)), seed=0)[1]
    assert {i.id for i in again} == {i.id for i in chosen}  # stable, whatever the order
    other = {i.id for i in carve_selection(val, seed=1)[1]}
    assert other != {i.id for i in chosen}  # another seed, another split


@pytest.mark.slow
def test_holdout_selection_chooses_the_best_on_items_the_search_did_not_see(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = TRANSFERS
    project = _project(tmp_path, scripted_server.url, engine=_holdout())
    assert main(["-C", str(project), "run"]) == 0
    captured = capsys.readouterr()
    assert "on 2 held-out selection items" in captured.err
    s = _summary(project)
    chosen = s.run.notes["selection"]
    assert chosen["mode"] == "holdout" and chosen["items"] == 2
    assert s.best is not None and chosen["chosen"] == s.best.id
    assert BETTER in s.best.content["instructions"]
    assert chosen["scores"][s.best.id] == 1.0 and chosen["scores"][s.seed.id] == 0.0
    assert s.val_items == 2  # the val figures are on the rest of val
    assert s.metric_calls <= 30  # the selection's evaluations are within the search's budget
    with RunStore(runs_db_path(project), readonly=True) as store:
        rows = len(store.evaluations(s.run.id, split="selection"))
    assert rows == 2 * len(chosen["candidates"])
    assert "selection: holdout: the best was chosen among" in captured.out
    assert s.gain is not None and s.gain.verdict == "better"


def test_holdout_selection_refuses_a_budget_it_cannot_fit_in_one_line(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = TRANSFERS
    # 21 candidates x 2 selection items = 42 > 30
    project = _project(tmp_path, scripted_server.url, engine=_holdout(top=20))
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err
    assert 'too small for [engine] select = "holdout"' in err and "Traceback" not in err


def test_the_default_selection_is_said(tmp_path, scripted_server, capsys):
    scripted_server.responder = TRANSFERS
    project = _project(tmp_path, scripted_server.url, test=False)
    assert main(["-C", str(project), "run"]) == 0
    assert "selection: val (gepa's): the val items chose the best" in capsys.readouterr().out


def test_a_run_that_kept_the_seed_says_there_is_no_gain(tmp_path, scripted_server, capsys):
    """A reflection that proposes nothing better: the best is the seed, and the headline says
    so rather than a "no difference detected" between a candidate and itself."""

    def stuck(body):
        user = body["messages"][-1]["content"]
        if is_reflection(user):
            return reply("```\nTell the user about the country, at length.\n```")
        return reply("A country with a long history.")

    scripted_server.responder = stuck
    project = _project(tmp_path, scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    s = _summary(project)
    assert s.best is not None and s.seed is not None and s.best.id == s.seed.id
    assert s.confirmation == {"state": "done", "items": 6, "calls": 6}  # the seed once
    assert (
        "Gain: none: the best is the seed (no candidate beat it on val); its test score "
        "0.000 on 6 test items" in out
    )


def test_a_run_recorded_before_the_confirmation_still_shows(tmp_path):
    """runs_v1.db (the first schema): no confirmation note, no test items: the headline says
    there is no test split, and the JSON summary has a null gain."""
    import shutil

    from skynet.runs.report import render_text, summary_json

    path = tmp_path / "runs.db"
    shutil.copy(Path(__file__).parent / "fixtures" / "runs_v1.db", path)
    with RunStore(path) as store:
        s = summarize(store, "20260101-120000-0a1b")
    text = render_text(s)
    assert f"Gain: +0.500 on val; {NO_TEST_SPLIT}" in text
    document = summary_json(s)
    assert document["gain"] is None and document["confirmation"] == {}
    assert document["metric_calls"] == {"search": 4, "confirmation": 0, "max": 10}
