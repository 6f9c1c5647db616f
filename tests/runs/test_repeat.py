"""`repeat = N`: the artifact runs N times per item (each its own draw, so the call cache does not
serve one reply N times), each run scored; the item's result is the mean, the spread and the
median-quality run's output; every run is recorded, and a rescore needs no task call."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from projects import CAPITAL, make_project

from skynet.cli import main
from skynet.evaluation import Result, aggregate
from skynet.project import open_project
from skynet.runner import evaluate_candidate, rescore
from skynet.testing import reply


class Alternating:
    """The scripted task model: for each prompt, the 1st, 3rd, 5th … call names the capital and
    the 2nd, 4th … does not, so N draws of one item score 1, 0, 1, … and the spread is real."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body):
        user = body["messages"][-1]["content"]
        with self.lock:
            n = self.calls[user]
            self.calls[user] += 1
        country = user.removeprefix("Country: ").strip()
        if n % 2 == 0:
            return reply(f"The capital of {country} is {CAPITAL.get(country, '?')}.")
        return reply(f"{country} is a country with a long history.")


def project_with_repeat(tmp_path: Path, url: str, repeat: int) -> Path:
    project = make_project(tmp_path / "p", url, budget=20)
    with open(project / "skynet.toml", "a") as f:
        f.write(f"\n[artifact]\nrepeat = {repeat}\n")
    return project


def evaluate_seed(project_dir: Path) -> tuple[list[Result], str]:
    project = open_project(project_dir)
    with project.open_store() as store:
        run_id = store.create_run(
            config=project.config.as_dict(),
            dataset_hash=project.dataset.hash,
            metric_hash=project.metric.source_hash,
            seed=0,
            engine="none",
            budget={},
            versions={},
        )
    seed = dict(project.artifact.components)
    return evaluate_candidate(project, seed, split="val", run_id=run_id).results, run_id


@pytest.mark.slow
@pytest.mark.parametrize(
    ("repeat", "mean", "spread", "shown_score", "shown_run", "note"),
    [
        (1, 1.0, None, 1.0, None, None),
        # Scores 1, 0: the mean 0.5; of the two middle runs the lower (run 2, score 0) is shown.
        (2, 0.5, (0.0, 1.0), 0.0, 1, "run 2, the lower of the two middle-quality runs"),
        # Scores 1, 0, 1: the median run is the first 1 (ties by draw).
        (3, 2 / 3, (0.0, 1.0), 1.0, 0, "run 1, the median-quality one"),
    ],
)
def test_repeat_scores_each_run_and_keeps_them_all(
    tmp_path, scripted_server, repeat, mean, spread, shown_score, shown_run, note
):
    responder = Alternating()
    scripted_server.responder = responder
    project = project_with_repeat(tmp_path, scripted_server.url, repeat)
    results, run_id = evaluate_seed(project)
    val_items = 8
    assert len(results) == val_items
    # Each item's prompt reached the server once per draw: the cache gave no reply twice.
    assert scripted_server.request_count == val_items * repeat
    assert set(responder.calls.values()) == {repeat}
    for r in results:
        assert r.ok
        assert r.score == pytest.approx(mean)
        assert r.spread == (None if spread is None else spread)
        assert len(r.repetitions) == (repeat if repeat > 1 else 0)
        if shown_score == 1.0:
            assert r.output.startswith("The capital of")  # the shown output is a right one
        else:
            assert "long history" in r.output
        if repeat > 1:
            assert r.shown == shown_run
            assert any(note in n for n in r.notes)
            assert [x.score for x in r.repetitions] == [float(i % 2 == 0) for i in range(repeat)]

    # Every run is recorded: a rescore grades them again without a task call.
    requests = scripted_server.request_count
    with open(project / "metric.py", "w") as f:
        f.write(
            "def score(input, output, expected=None):\n"
            "    return (0.25 if expected['capital'] in output else 0.0), {'feedback': 'x'}\n"
        )
    done = rescore(open_project(project), run_id)
    assert done.rescored == val_items
    assert scripted_server.request_count == requests
    with open_project(project).open_store() as store:
        rows = [e for e in store.evaluations(run_id) if e.metric_hash == done.metric_hash]
    assert len(rows) == val_items
    for row in rows:
        assert row.score == pytest.approx(mean / 4)
        assert len(row.repetitions) == (repeat if repeat > 1 else 0)


@pytest.mark.slow
def test_show_reports_mean_and_spread_of_a_repeated_run(tmp_path, scripted_server, capsys):
    scripted_server.responder = Alternating()
    project = project_with_repeat(tmp_path, scripted_server.url, 3)
    assert main(["-C", str(project), "run"]) == 0
    capsys.readouterr()
    assert main(["-C", str(project), "show"]) == 0
    out = capsys.readouterr().out
    assert "Repetitions of the best candidate" in out
    assert "3 runs per item" in out
    assert "0.000-1.000" in out  # the spread of an item whose runs disagree
    assert "run 1" in out


def test_aggregate_leaves_failed_runs_out_of_the_means():
    ok = Result(item_id="a", output="x", score=0.8, scores={"q": 0.8})
    ok2 = Result(item_id="a", output="y", score=0.4, scores={"q": 0.4})
    bad = Result(item_id="a", error="the artifact failed", error_kind="task")
    r = aggregate("a", [ok, bad, ok2])
    assert r.ok and r.score == pytest.approx(0.6) and r.scores == {"q": pytest.approx(0.6)}
    assert r.spread == (0.4, 0.8)
    assert r.output == "y" and r.shown == 2  # of two scored runs, the lower middle one
    assert any("1 of 3 runs failed" in n for n in r.notes)
    every = aggregate("a", [bad, bad])
    assert not every.ok and len(every.repetitions) == 2
    assert any("all 2 runs" in n for n in every.notes)


def test_aggregate_counts_a_run_the_candidate_crashed_as_0():
    ok = Result(item_id="a", output="x", score=0.9, scores={"q": 0.9})
    crash = Result(item_id="a", error="the candidate failed: exit 5", error_kind="candidate")
    metric = Result(item_id="a", output="z", error="score() raised", error_kind="metric")
    r = aggregate("a", [ok, crash, metric])
    # The crash is 0 in the means (score and named scores); the metric fault is left out.
    assert r.ok and r.score == pytest.approx(0.45) and r.scores == {"q": pytest.approx(0.45)}
    assert r.spread == (0.0, 0.9) and r.extra["spread"] == [0.0, 0.9]
    assert r.output == "x"  # the output shown is a scored run's
    assert any("1 of 3 runs failed (the candidate's own): 0 each" in n for n in r.notes)
    assert any("1 of 3 runs failed: left out" in n for n in r.notes)
    # No run scored: the item is the candidate's failure (a 0 in the candidate's mean), not the
    # metric's (which would be left out), whichever came first.
    none_scored = aggregate("a", [metric, crash])
    assert not none_scored.ok and none_scored.error_kind == "candidate"


def test_repeat_must_be_a_positive_integer(tmp_path, scripted_server, capsys):
    project = project_with_repeat(tmp_path, scripted_server.url, 0)
    assert main(["-C", str(project), "check"]) == 2
    err = capsys.readouterr().err
    assert "artifact.repeat" in err and ">= 1" in err
