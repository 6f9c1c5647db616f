"""The `skynet` command end to end against the loopback scripted server:
init → check → run → kill → resume → show → eval, and the user errors (exit code 2, one line)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from projects import (
    BETTER,
    COUNTRIES,
    make_project,
    make_sum_code_project,
    never_perfect,
    task_responder,
)

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import is_reflection, reply


def runs_db(project: Path) -> sqlite3.Connection:
    """The raw file, for polling it while another process writes it."""
    return sqlite3.connect(project / ".skynet" / "runs.db")


def runs_store(project: Path) -> RunStore:
    """The project's run store, opened for reading."""
    return RunStore(runs_db_path(project), readonly=True)


def test_init_writes_a_project_that_checks(tmp_path, capsys):
    assert main(["init", str(tmp_path / "p")]) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "data.jsonl",
        "metric.py",
        "prompt.md",
        "skynet.toml",
    ]
    assert main(["-C", str(tmp_path / "p"), "check"]) == 0
    out = capsys.readouterr().out
    assert "metric self-test passed" in out
    # 26 test items see only large gains: check says how large, and how many items see 0.10.
    assert (
        "note: the test split's 26 items detect gains of 0.39 or more at 80% power (0/1 scores, "
        "half the items changing); about 393 items detect 0.10\n"
    ) in out
    assert "note: the val split's 14 items detect gains of 0.53 or more" in out
    assert main(["init", str(tmp_path / "p")]) == 2  # never overwrites


def test_check_says_when_there_is_no_test_split(tmp_path, capsys):
    # make_project splits its items into train and val only; check calls no model.
    project = make_project(tmp_path / "p", "http://127.0.0.1:9")
    assert main(["-C", str(project), "check"]) == 0
    out = capsys.readouterr().out
    assert "/ 0 test items" in out
    assert (
        "note: no test split: the run's gain cannot be confirmed on held-out items; add test "
        "items ([data] split or a test file)\n"
    ) in out
    assert "note: the test split's" not in out  # no item: no size to speak of


def test_examples_capitals_is_the_starter_as_a_real_folder(tmp_path):
    # A real folder (a symlink becomes a dangling link under `cp -r`), equal to what init writes.
    # The source is skynet/templates/capitals (what `skynet init` writes, shipped in the wheel);
    # examples/capitals is its copy for the README's `skynet run examples/capitals`.
    example = Path(__file__).resolve().parents[1] / "examples" / "capitals"
    assert not example.is_symlink()
    assert main(["init", str(tmp_path / "p")]) == 0
    sync = "edit skynet/templates/capitals, then: cp skynet/templates/capitals/* examples/capitals/"
    files = {p.name for p in example.iterdir() if p.is_file() and not p.name.startswith(".")}
    assert files == {p.name for p in (tmp_path / "p").iterdir()}, sync
    for written in (tmp_path / "p").iterdir():
        assert (example / written.name).read_bytes() == written.read_bytes(), (
            f"examples/capitals/{written.name} differs from the starter's; {sync}"
        )


@pytest.mark.slow
def test_run_show_eval_end_to_end(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "check"]) == 0
    assert main(["-C", str(project), "run"]) == 0
    out = capsys.readouterr().out
    assert "best candidate written to" in out
    best = next((project / ".skynet" / "runs").glob("*/best_prompt.md")).read_text()
    assert BETTER in best and "Country: {country}" in best

    with runs_store(project) as store:
        (run,) = store.list_runs()
        run_id, status = run.id, run.status
        best_id, seed_id = run.best_candidate_id, run.seed_candidate_id
        assert status == "finished" and best_id != seed_id
        scores = store.mean_scores(run_id, split="val")
        calls = Counter(c.role for c in store.calls(run_id))
    assert scores[seed_id] == 0.0 and scores[best_id] == 1.0
    assert calls["task"] > 0 and calls["reflection"] >= 1

    html = tmp_path / "report.html"
    assert main(["-C", str(project), "show", "--html", str(html)]) == 0
    shown = capsys.readouterr().out
    assert "baseline" in shown and "best" in shown and "+1.000" in shown
    assert "<svg" in html.read_text()

    assert main(["-C", str(project), "eval", "--candidate", "best", "--split", "val"]) == 0
    assert "mean score 1.000" in capsys.readouterr().out
    assert main(["-C", str(project), "runs"]) == 0
    assert run_id in capsys.readouterr().out


@pytest.mark.slow
def test_kill_and_resume_pays_nothing_twice(tmp_path, scripted_server):
    def slow(body):
        step = task_responder(body)
        return reply(step.text, latency_s=0.15)

    scripted_server.responder = slow
    project = make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=1)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cmd = [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    recorded = 0
    while time.monotonic() < deadline and recorded < 6:
        time.sleep(0.2)
        if (project / ".skynet" / "runs.db").exists():
            try:
                with runs_db(project) as db:
                    recorded = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with runs_store(project) as store:
        (run,) = store.list_runs()
        run_id, status = run.id, run.status
        before = {(e.candidate_id, e.item_id, e.score) for e in store.evaluations(run_id)}
    assert status == "running" and len(before) >= 6
    requests_before = scripted_server.request_count

    done = subprocess.run(
        [*cmd, "--resume", run_id], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert f"resuming run {run_id}" in done.stderr
    with runs_store(project) as store:
        after = {(e.candidate_id, e.item_id, e.score) for e in store.evaluations(run_id)}
        assert store.get_run(run_id).status == "finished"
    assert before <= after and len(after) > len(before)  # nothing recorded was lost
    # Nothing recorded was paid again: no prompt was sent twice, except one in flight at the kill.
    sent = Counter(
        json.dumps([r["messages"], r.get("temperature"), r.get("seed")], sort_keys=True)
        for r in scripted_server.requests
    )
    repeats = sum(n - 1 for n in sent.values())
    assert repeats <= 1, f"{repeats} prompts were sent again after resume"
    assert scripted_server.request_count > requests_before


def one_line_error(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("skynet:")]
    assert len(lines) == 1 and lines[0].startswith("skynet: error: "), lines
    return lines[0]


def test_bad_config_is_one_line_and_exit_2(tmp_path, scripted_server, capsys):
    project = make_project(tmp_path / "p", scripted_server.url)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace("max_metric_calls", "max_metric_call"))
    assert main(["-C", str(project), "run"]) == 2
    line = one_line_error(capsys)
    assert "budget.max_metric_call" in line and "budget.max_metric_calls" in line
    assert scripted_server.request_count == 0


def test_bad_data_row_is_one_line_and_exit_2(tmp_path, scripted_server, capsys):
    project = make_project(tmp_path / "p", scripted_server.url)
    with open(project / "data.jsonl", "a") as f:
        f.write('{"id": "bad", "country": "Oz", "split": "val"}\n')
    assert main(["-C", str(project), "run"]) == 2
    line = one_line_error(capsys)
    assert f"data.jsonl:{len(COUNTRIES) + 1}:" in line and "capital" in line
    assert scripted_server.request_count == 0


def test_bad_metric_is_refused_before_any_model_call(tmp_path, scripted_server, capsys):
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "metric.py").write_text(
        "def score(input, output, expected=None):\n    return 1.0, {'feedback': 'fine'}\n"
    )
    assert main(["-C", str(project), "run"]) == 2
    line = one_line_error(capsys)
    assert "self-test failed" in line
    assert scripted_server.request_count == 0


def test_a_metric_that_raises_aborts_the_run_with_a_clear_message(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "metric.py").write_text(
        textwrap.dedent(
            """
        def score(input, output, expected=None):
            if "history" in output:
                raise RuntimeError("metric bug")
            return float(expected["capital"] in output), {"feedback": ""}
        """
        )
    )
    assert main(["-C", str(project), "run"]) == 2
    line = one_line_error(capsys)
    assert "evaluations failed" in line and "metric bug" in line
    with runs_store(project) as store:
        (run,) = store.list_runs()
        status = run.status
        errors = sum(
            1 for e in store.evaluations(run.id) if e.error_kind == "metric" and e.score is None
        )
    assert status == "aborted" and errors >= 5


def test_a_budget_too_small_to_propose_is_refused_with_the_number(
    tmp_path, scripted_server, capsys
):
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "run", "--max-metric-calls", "5"]) == 2
    line = one_line_error(capsys)
    assert "--max-metric-calls 14" in line  # 8 val items + 2 x minibatch of 3
    assert scripted_server.request_count == 0


@pytest.mark.slow
@pytest.mark.embedded
def test_the_starter_runs_on_the_embedded_model(tmp_path, capsys):
    project = tmp_path / "capitals"
    assert main(["init", str(project)]) == 0
    assert main(["-C", str(project), "run", "--max-metric-calls", "20"]) == 0
    out = capsys.readouterr().out
    assert "baseline" in out and "best candidate written to" in out
    with runs_store(project) as store:
        (run,) = store.list_runs()
        calls = Counter(c.role for c in store.calls(run.id))
        rows = len(store.evaluations(run.id))
    assert calls["task"] >= 20 and calls["reflection"] >= 1 and rows >= 20


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path, scripted_server):
    def slow(body):
        return reply(task_responder(body).text, latency_s=0.2)

    scripted_server.responder = slow
    project = make_project(tmp_path / "p", scripted_server.url, budget=40, concurrency=2)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline, recorded = time.monotonic() + 90, 0
    while time.monotonic() < deadline and recorded < 3:
        time.sleep(0.2)
        try:
            with runs_db(project) as db:
                recorded = db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
        except sqlite3.OperationalError:
            pass
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    with runs_store(project) as store:
        (run,) = store.list_runs()
        run_id, status = run.id, run.status
    assert status == "stopped"
    assert f"skynet run --resume {run_id}" in err
    assert "Traceback" not in err


def test_a_failing_reflection_model_stops_the_run_with_exit_1(tmp_path, scripted_server, capsys):
    from skynet.testing import fail

    def respond(body):
        if is_reflection(body):
            return fail(400)
        return task_responder(body)

    scripted_server.responder = respond
    project = make_project(tmp_path / "p", scripted_server.url, budget=60)
    assert main(["-C", str(project), "run"]) == 1
    err = capsys.readouterr().err
    assert "skynet: model error:" in err and "reflection" in err
    assert "Traceback" not in err
    with runs_store(project) as store:
        (run,) = store.list_runs()
        status = run.status
        failed = sum(1 for p in store.proposals(run.id) if p.status == "failed")
        evaluations = len(store.evaluations(run.id))
    assert status == "failed" and failed == 3
    assert evaluations < 60  # the budget was not burned on a run that could not propose


@pytest.mark.slow
def test_resuming_a_finished_run_is_refused(tmp_path, scripted_server, capsys):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    with runs_store(project) as store:
        (run,) = store.list_runs()
        run_id = run.id
    capsys.readouterr()
    assert main(["-C", str(project), "run", "--resume", run_id]) == 2
    assert "already finished" in one_line_error(capsys)


def test_set_overrides_any_key_and_a_bad_one_is_named(tmp_path, scripted_server, capsys):
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "check", "--set", "artifact.max_tokens=64"]) == 0
    capsys.readouterr()
    assert main(["-C", str(project), "check", "--set", "artifact.max_token=64"]) == 2
    line = one_line_error(capsys)
    assert "artifact.max_token" in line and "artifact.max_tokens" in line
    assert main(["-C", str(project), "check", "--set", "novalue"]) == 2
    assert "KEY=VALUE" in one_line_error(capsys)


@pytest.mark.slow
def test_rescore_scores_saved_outputs_without_calling_the_task_model(
    tmp_path, scripted_server, capsys
):
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=20)
    assert main(["-C", str(project), "run"]) == 0
    requests = scripted_server.request_count
    # A stricter metric: a right reply must also end with "!" (none of the saved ones does).
    (project / "metric.py").write_text(
        textwrap.dedent(
            """
        def score(input, output, expected=None):
            named = expected["capital"].lower() in output.lower()
            loud = output.strip().endswith("!")
            return 0.5 * named + 0.5 * (named and loud), {"feedback": "name it, end with '!'"}
        """
        )
    )
    capsys.readouterr()
    assert main(["-C", str(project), "rescore"]) == 0
    out = capsys.readouterr().out
    assert "(no task-model call)" in out
    assert scripted_server.request_count == requests  # no model call at all
    with runs_store(project) as store:
        (run,) = store.list_runs()
        evaluations = store.evaluations(run.id)
        hashes = len({e.metric_hash for e in evaluations})
        rescored = sum(1 for e in evaluations if e.metric_hash != run.metric_hash)
        total_before = sum(1 for e in evaluations if e.metric_hash == run.metric_hash)
    assert hashes == 2 and rescored == total_before
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "+0.500" in shown  # best val is 0.5 under the new metric (it was 1.0)
    assert main(["-C", str(project), "rescore"]) == 0  # a second rescore has nothing to do
    assert "rescored 0 saved output(s)" in capsys.readouterr().out


def test_a_dollar_budget_stops_the_run_within_one_proposal(tmp_path, scripted_server, capsys):
    scripted_server.responder = lambda body: reply(
        never_perfect(body).text, prompt_tokens=1000, completion_tokens=0
    )
    project = make_project(tmp_path / "p", scripted_server.url, budget=400)
    # $1 per million input tokens, 1,000 tokens a call: every call costs $0.001.
    assert main(["-C", str(project), "run", "--max-cost-usd", "0.03"]) == 0
    with runs_store(project) as store:
        (run,) = store.list_runs()
        spent = sum(c.cost_usd or 0.0 for c in store.calls(run.id) if not c.cached)
        evaluations = len(store.evaluations(run.id))
        status = run.status
    assert status == "finished" and evaluations < 400
    # Reserved before sent: never past the budget. It stops within one proposal of it (a
    # reflection call, the child on a minibatch of 3 and on the 8 val items) plus the refused
    # call's worst case (its input and max_tokens 4,096 at $2 per million output tokens).
    one_proposal = 0.001 * (1 + 3 + 8)
    assert 0.03 - one_proposal - 0.001 - 4096 * 2e-6 <= spent <= 0.03 + 1e-9, spent
    assert "stopped: budget max_cost_usd = $0.03 reached" in capsys.readouterr().err


def test_dry_run_plans_and_prices_without_recording_a_run(tmp_path, scripted_server, capsys):
    scripted_server.responder = lambda body: reply(
        task_responder(body).text, prompt_tokens=1000, completion_tokens=0
    )
    project = make_project(tmp_path / "p", scripted_server.url, budget=40)
    assert main(["-C", str(project), "run", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "planned metric calls: 40 (at least 14 to propose once)" in out
    assert "task:       $0.0400 ($0.001000 x 40)   from 3 real call(s)" in out
    assert "reflection: $" in out and "total:      ~$" in out
    assert "  confirmation: none (no test split: the gain will not be confirmed)\n" in out
    assert scripted_server.request_count == 3  # three sampled val items, nothing else
    db = project / ".skynet" / "runs.db"
    if db.exists():
        with runs_store(project) as store:
            assert len(store.list_runs()) == 0
    # The real run does not pay again for the sampled calls (they are in the call cache).
    assert main(["-C", str(project), "run"]) == 0
    sent = Counter(
        json.dumps(r["messages"], sort_keys=True)
        for r in scripted_server.requests
        if not is_reflection(r)
    )
    assert max(sent.values()) == 1


def test_the_dry_run_counts_and_prices_the_confirmation(tmp_path, scripted_server, capsys):
    scripted_server.responder = lambda body: reply(
        task_responder(body).text, prompt_tokens=1000, completion_tokens=0
    )
    project = make_project(tmp_path / "p", scripted_server.url, budget=40)
    with open(project / "data.jsonl", "w") as f:  # 5 of the 16 items held out for the test
        for i, (country, capital) in enumerate(COUNTRIES):
            split = "test" if i >= 11 else "val" if i % 2 else "train"
            row = {"id": f"c{i}", "country": country, "capital": capital, "split": split}
            f.write(json.dumps(row) + "\n")
    dry = ["-C", str(project), "run", "--dry-run"]
    assert main(dry) == 0
    out = capsys.readouterr().out
    # $0.001 a task call, no judge (a Python metric): the seed and the best on 5 items each.
    assert (
        "  confirmation: $0.0100 for 10 metric calls, task + judge (seed and best on 5 test "
        "items)\n"
    ) in out
    reflection = float(out.split("reflection: $", 1)[1].split()[0])
    total = float(out.split("total:      ~$", 1)[1].split()[0])
    assert total == pytest.approx(0.040 + reflection + 0.010, abs=1e-4)  # the search's and it

    assert main([*dry, "--set", "budget.confirm=false"]) == 0
    off = capsys.readouterr().out
    assert "  confirmation: off ([budget] confirm = false)\n" in off
    total_off = float(off.split("total:      ~$", 1)[1].split()[0])
    assert total_off == pytest.approx(total - 0.010, abs=1e-4)
    assert scripted_server.request_count == 3  # the second dry run's samples were cached


# --------------------------------------------------------------------------------------------
# `skynet eval` on a project with no run: an evaluation-only run.

ATTACK = "\x1b[2J\x1b[31mPWNED\r"


@pytest.mark.slow
def test_eval_on_a_fresh_project_records_an_evaluation_only_run(tmp_path, scripted_server, capsys):
    from skynet.runs import EVALUATION, RunStore

    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    (project / "better.md").write_text(
        f"=== instructions ===\n{BETTER}\n=== user ===\nCountry: {{country}}\n"
    )
    assert not (project / ".skynet").exists()
    assert main(["eval", str(project), "--candidate", "better.md", "--split", "val"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("better.md on val: mean score 1.000 over 8 item(s) · recorded in")
    assert "evaluation-only run" in line

    with RunStore(project / ".skynet" / "runs.db") as store:
        (run,) = store.list_runs()
        rows = store.evaluations(run.id)
    assert (run.engine, run.status, run.best_candidate_id) == (EVALUATION, "finished", None)
    assert run.id in line and run.dataset_hash and run.finished
    assert len(rows) == 8 and {r.split for r in rows} == {"val"}
    assert all(r.score == 1.0 for r in rows)
    assert run.notes["evaluated"] == {rows[0].candidate_id: "better.md"}

    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert f"Run {run.id}  finished  evaluation only (skynet eval)" in shown
    row = next(x for x in shown.splitlines() if x.strip().startswith(rows[0].candidate_id))
    assert "better.md" in row and "1.000" in row
    assert "baseline" not in shown and "Best candidate against the seed" not in shown

    # The project's seed, by name: a second evaluation-only run, its own line in `skynet runs`.
    assert main(["eval", str(project), "--candidate", "seed", "--split", "val"]) == 0
    assert "seed on val: mean score 0.000 over 8 item(s)" in capsys.readouterr().out
    assert main(["-C", str(project), "runs"]) == 0
    listed = capsys.readouterr().out.splitlines()[1:]
    assert len(listed) == 2 and all(" eval " in x for x in listed)

    # It is no optimization: resuming one is refused, and `best` still has nothing to take.
    assert main(["-C", str(project), "run", "--resume", run.id]) == 2
    assert "is an evaluation" in one_line_error(capsys)
    assert main(["eval", str(project), "--candidate", "best"]) == 2
    assert "no finished run has a best candidate" in one_line_error(capsys)


@pytest.mark.slow
def test_eval_best_with_no_run_is_one_line_naming_the_fix(tmp_path, scripted_server):
    project = make_project(tmp_path / "p", scripted_server.url)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "skynet.cli", "eval", str(project), "--candidate", "best"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "skynet: error: no finished run has a best candidate yet: `skynet run` makes one, or "
        "score the seed with `skynet eval --candidate seed`"
    ]
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (project / ".skynet" / "runs.db").exists()  # nothing recorded
    assert scripted_server.request_count == 0


@pytest.mark.slow
def test_eval_after_a_run_records_best_and_seed_in_that_run(tmp_path, scripted_server, capsys):
    from skynet.runs import RunStore

    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url)
    assert main(["-C", str(project), "run"]) == 0
    for candidate in ("best", "seed"):
        assert main(["-C", str(project), "eval", "--candidate", candidate, "--split", "val"]) == 0
    out = capsys.readouterr().out
    with RunStore(project / ".skynet" / "runs.db") as store:
        (run,) = store.list_runs()  # no evaluation-only run: both went into the run
    assert f"mean score 1.000 over 8 item(s) · recorded in run {run.id}" in out
    assert f"seed ({run.seed_candidate_id}) on val: mean score 0.000" in out


def make_code_eval_project(root: Path) -> Path:
    """A code project: run(input) sums 0..n. The metric raises on item n2 (a metric fault)."""
    return make_sum_code_project(
        root,
        code=HONEST,
        metric="""
            def score(input, output, expected=None):
                if input["n"] == 2:
                    raise ValueError("no grade for item 2")
                right = isinstance(output, dict) and output.get("total") == expected["total"]
                return float(right), {"feedback": "right" if right else "wrong"}
            """,
        toml="timeout_s = 10\n",
        split=lambda n: "test" if n < 8 else ("train" if n % 2 else "val"),
    )


# Right on every item but the hardest (n = 7).
HONEST = "def run(input):\n    n = input['n']\n    return {'total': n * (n + 1) // 2 + (n == 7)}\n"
# Right on the easy items; on the hard ones (n >= 6) it prints an escape sequence and crashes.
CRASHER = textwrap.dedent(
    f"""
    import sys

    def run(input):
        n = input["n"]
        if n >= 6:
            sys.stderr.write({ATTACK!r})
            raise RuntimeError({ATTACK!r} + " on a hard item")
        return {{"total": n * (n + 1) // 2}}
    """
)


@pytest.mark.slow
def test_eval_counts_a_crash_as_0_and_leaves_a_metric_error_out(tmp_path, capsys):
    project = make_code_eval_project(tmp_path / "p")
    (project / "crasher.py").write_text(CRASHER)
    for name in ("code.py", "crasher.py"):
        assert main(["eval", str(project), "--candidate", name, "--split", "test"]) == 0
    out = capsys.readouterr().out
    # Honest: 6 of the 7 gradable items right; the metric's fault on n2 is left out.
    assert "code.py on test: mean score 0.857 over 7 item(s) (1 metric error left out)" in out
    # The crasher's 2 crashes are 0s: 5/7. Left out, they would have made it 1.000, the best.
    assert (
        "crasher.py on test: mean score 0.714 over 7 item(s) "
        "(2 candidate failures as 0, 1 metric error left out)"
    ) in out
    assert "metric error on item 'n2'" in out and "no grade for item 2" in out
    crash_lines = [x for x in out.splitlines() if "candidate error on item 'n6'" in x]
    assert len(crash_lines) == 1
    # What the candidate wrote reaches the terminal escaped, never as a control sequence.
    assert "\\x1b[2J\\x1b[31mPWNED\\r" in crash_lines[0]
    assert "\x1b" not in out and "\r" not in out

    # `skynet show` counts the same way.
    assert main(["-C", str(project), "show"]) == 0
    shown = capsys.readouterr().out
    assert "0.714 (2 candidate failures as 0, 1 metric error left out)" in shown


def test_a_model_output_with_control_characters_is_printed_escaped(
    tmp_path, scripted_server, capsys
):
    def hostile(body):
        user = body["messages"][-1]["content"]
        if user.endswith("Japan"):
            return reply(f"Tokyo {ATTACK}")
        return task_responder(body)

    scripted_server.responder = hostile
    project = make_project(tmp_path / "p", scripted_server.url)
    # A metric that quotes the output in its error, as a parse error would.
    with open(project / "metric.py", "a") as f:
        f.write(
            "\n_score = score\n\n"
            "def score(input, output, expected=None):\n"
            "    if 'PWNED' in output:\n"
            "        raise ValueError(f'cannot parse {output}')\n"
            "    return _score(input, output, expected)\n"
        )
    assert main(["eval", str(project), "--candidate", "seed", "--split", "val"]) == 0
    captured = capsys.readouterr()
    assert "1 metric error left out" in captured.out
    line = next(x for x in captured.out.splitlines() if "metric error on item 'c1'" in x)
    assert "cannot parse Tokyo \\x1b[2J\\x1b[31mPWNED\\r" in line
    assert "\x1b" not in captured.out + captured.err and "\r" not in captured.out + captured.err


def test_eval_under_a_money_budget_stops_cleanly_at_the_limit(tmp_path, scripted_server, capsys):
    """`skynet eval` is held to [budget] max_cost_usd like a run: the call that would pass it is
    not sent, what was evaluated is recorded and scored, and one line says why it stopped."""
    scripted_server.responder = lambda body: reply(
        task_responder(body).text, prompt_tokens=1000, completion_tokens=0
    )
    project = make_project(tmp_path / "p", scripted_server.url)
    # Each call is billed $0.001 (1,000 prompt tokens at $1 per million).
    args = ["eval", str(project), "--candidate", "seed", "--split", "val"]
    assert main([*args, "--set", "budget.max_cost_usd=0.0031"]) == 0
    captured = capsys.readouterr()
    assert "stopped after 3 item(s), 5 not evaluated" in captured.err
    assert "max_cost_usd" in captured.err
    assert "over 3 item(s)" in captured.out
    assert len(scripted_server.requests) == 3
    with runs_store(project) as store:
        (run,) = store.list_runs()
        spent = sum(c.cost_usd or 0.0 for c in store.calls(run.id) if not c.cached)
        status = run.status
    assert spent <= 0.0031 and status == "stopped"
