"""Issue 27, the budget's count and the store's size: the metric calls the progress line shows are
the ones the report and `skynet show --json` give (replays said), a run whose best is perfect on
val stops proposing, and huge replies or outputs do not grow runs.db (the cache keeps them whole,
for a replay). Whole runs against the loopback server (skynet.testing.ScriptedServer)."""

from __future__ import annotations

import json
import re
import sqlite3
import textwrap
from pathlib import Path

import pytest
from projects import BETTER, make_project, never_perfect, task_responder

from skynet.cli import main
from skynet.runs import RunStore
from skynet.testing import is_reflection, reply

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _store(project: Path) -> RunStore:
    return RunStore(project / ".skynet" / "runs.db")


def _show_json(project: Path, run_id: str, capsys) -> dict:
    assert main(["-C", str(project), "show", run_id, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _set_toml(project: Path, old: str, new: str) -> None:
    path = project / "skynet.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


# -- row 1: one count, on the progress line, in the report and in the JSON -------------------
# never_perfect: no candidate is perfect on val, so gepa spends its budget and asks again for
# results it has (replays).


@pytest.mark.slow
@pytest.mark.parametrize("budget", [30, 40], ids=["budget-30", "budget-40"])
def test_the_progress_line_and_the_report_give_one_count(tmp_path, scripted_server, capsys, budget):
    scripted_server.responder = never_perfect
    project = make_project(tmp_path / "p", scripted_server.url, budget=budget)
    assert main(["-C", str(project), "run"]) == 0
    captured = capsys.readouterr()
    last = re.findall(r"^metric calls (\d+)/(\d+) .*?(?:· (\d+) replayed)?$", captured.err, re.M)
    used, replayed = int(last[-1][0]), int(last[-1][2] or 0)
    assert int(last[-1][1]) == budget and used >= budget  # stopped by its budget
    assert replayed > 0  # the run asked again for results it had: they count
    [line] = [x for x in captured.out.splitlines() if x.startswith("Metric calls used:")]
    assert line == (
        f"Metric calls used: {used} of {budget} ({replayed} replayed from the run's records: "
        "not scored again, but counted, as the engine counts them)"
    )
    run_id = _store(project).list_runs()[0].id
    assert _show_json(project, run_id, capsys)["metric_calls"]["search"] == used
    # The replays are not new records: the rest were scored (an item twice in one minibatch
    # may be scored twice at once and recorded once).
    store = _store(project)
    scored = [e for e in store.evaluations(run_id) if e.split != "test"]
    assert 0 < len(scored) <= used - replayed


def test_the_count_is_defined_once_in_the_docs():
    runs = (DOCS / "runs.md").read_text()
    assert runs.count("## Metric calls used") == 1
    section = runs.split("## Metric calls used", 1)[1].split("\n## ", 1)[0]
    for said in ("replay", "by up to one iteration", "perfect_score", "cache_evaluation"):
        assert said in section, said
    config = (DOCS / "configuration.md").read_text()
    assert "runs.md#metric-calls-used" in config


# -- row 2: a run whose best is perfect on val stops proposing --------------------------------
def _scaled_metric(top: float) -> str:
    return textwrap.dedent(
        f"""
        def score(input, output, expected=None):
            named = expected["capital"].lower() in output.lower()
            fb = "right" if named else f"name the capital: {{expected['capital']}}"
            return {top} * float(named), {{"feedback": fb}}
        """
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("top", "option", "stops"),
    [
        (1.0, None, True),  # scores in [0, 1]: 1.0 is perfect, as gepa.optimize assumes
        (10.0, None, False),  # another scale, unsaid: a val mean of 1.0 or more is not perfect
        (10.0, 10.0, True),  # said in [engine.options] perfect_score
    ],
    ids=["scores-0-1", "scores-0-10-unsaid", "scores-0-10-perfect_score"],
)
def test_a_run_perfect_on_val_stops_proposing(
    tmp_path, scripted_server, capsys, top, option, stops
):
    scripted_server.responder = task_responder  # BETTER names every capital: val becomes perfect
    project = make_project(tmp_path / "p", scripted_server.url, budget=120)
    (project / "metric.py").write_text(_scaled_metric(top))
    if option is not None:
        _set_toml(project, "[budget]", f"[engine.options]\nperfect_score = {option}\n\n[budget]")
    assert main(["-C", str(project), "run"]) == 0
    captured = capsys.readouterr()
    store = _store(project)
    run = store.list_runs()[0]
    best = run.best_candidate_id
    assert best is not None and BETTER in store.candidates(run.id)[-1].content["instructions"]
    reflections = [c for c in store.calls(run.id) if c.role == "reflection"]
    said = f"the best is perfect on val: score {top:g} on each of the 8 items"
    if stops:
        assert run.notes["stopped_by"] == said
        assert f"stopped: {said}; the best so far is kept" in captured.err
        assert len(reflections) == 1  # no proposal after the perfect one
        assert run.notes["metric_calls"]["used"] < 120
    else:
        assert run.notes["stopped_by"] == "max_metric_calls = 120 reached"
        assert len(reflections) > 1


# -- row 3: runs.db is bounded; cache.db keeps what a replay needs -----------------------------
BIG = 10_000_000
LENGTH_METRIC = f"""
def score(input, output, expected=None):
    whole = len(output) == {BIG}
    return float(whole), {{"feedback": "whole" if whole else f"{{len(output)}} characters"}}
"""


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def _huge(body):
    if is_reflection(body["messages"][-1]["content"]):
        return reply(f"```\n{BETTER}\n```")
    return reply("x" * BIG)


@pytest.mark.slow
@pytest.mark.parametrize("replies", [4], ids=["four-10MB-replies"])
def test_huge_replies_do_not_grow_runs_db(tmp_path, scripted_server, capsys, replies):
    scripted_server.responder = _huge
    project = make_project(tmp_path / "p", scripted_server.url)
    rows = (project / "data.jsonl").read_text().splitlines()[: 2 * replies]  # `replies` val items
    (project / "data.jsonl").write_text("\n".join(rows) + "\n")
    (project / "metric.py").write_text(LENGTH_METRIC)
    command = ["-C", str(project), "eval", "--candidate", "seed", "--split", "val"]
    assert main(command) == 0
    assert f"over {replies} item(s)" in capsys.readouterr().out
    runs_db, cache_db = project / ".skynet" / "runs.db", project / ".skynet" / "cache.db"
    # The metric scored each whole reply; runs.db keeps 256 KiB of each text, the cut said.
    with sqlite3.connect(runs_db) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert _size(runs_db) < 3_000_000, _size(runs_db)
    assert _size(cache_db) >= replies * BIG  # the cache holds the replies whole
    store = _store(project)
    [run] = store.list_runs()
    evaluations = store.evaluations(run.id)
    assert [e.score for e in evaluations] == [1.0] * replies
    for e in evaluations:
        assert e.output_is_repr  # not the output itself: it cannot be scored again
        assert re.search(r"…\[cut: [\d,]+ more bytes, sha256 [0-9a-f]{64}\]$", e.output)
        assert len(e.output) < 300_000
    for row in store.call_rows(run.id):
        called = store.call(run.id, row.seq)
        assert called is not None and len(called.call.reply) < 300_000
    # A replay from the cache returns the whole reply: scored again, all whole, no request.
    asked = scripted_server.request_count
    assert main(command) == 0
    assert f"over {replies} item(s)" in capsys.readouterr().out
    assert scripted_server.request_count == asked
    latest = store.list_runs()[0].id
    assert latest != run.id
    assert [e.score for e in store.evaluations(latest)] == [1.0] * replies


def test_dspy_gepa_stops_once_perfect_on_val_too(tmp_path, scripted_server, capsys):
    from artifacts.test_dspy_runs import make_dspy_project, responder

    scripted_server.responder = responder  # its reflection proposes the instruction that is right
    project = make_dspy_project(tmp_path / "p", scripted_server.url)
    _set_toml(project, 'name = "gepa"', 'name = "dspy-gepa"')
    _set_toml(project, "max_metric_calls = 20", "max_metric_calls = 200")
    assert main(["-C", str(project), "run"]) == 0
    store = _store(project)
    run = store.list_runs()[0]
    said = "the best is perfect on val: score 1 on each of the 4 items"
    assert run.notes["stopped_by"] == said, run.notes
    assert f"stopped: {said}; the best so far is kept" in capsys.readouterr().err
    assert run.notes["metric_calls"]["used"] < 200
