"""Resume after an outage: what the model failed on is asked again once the endpoint is fixed,
nothing recorded is paid twice, and replayed proposals are recorded once."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
from projects import make_project, never_perfect, task_responder

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import fail, is_reflection

pytestmark = pytest.mark.slow


class Outage:
    """The scripted model, down (503, no wait) for task calls from the `after`-th one on."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.down = True
        self.task_calls = 0
        self._lock = threading.Lock()

    def __call__(self, body):
        if not is_reflection(body):
            with self._lock:
                self.task_calls += 1
                failing = self.down and self.task_calls > self.after
            if failing:
                return fail(503, retry_after=0)
        return never_perfect(body)  # a perfect best would stop it before the outage


def _rows(project):
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        run_id, status, error = run.id, run.status, run.error
        errors = sum(1 for e in store.evaluations(run_id) if e.error is not None)
        proposals = Counter(p.status for p in store.proposals(run_id))
        candidates = [c.id for c in store.candidates(run_id)]
        paid = sum(1 for c in store.calls(run_id) if not c.cached and c.ok and c.role == "task")
    return run_id, status, error, errors, proposals, candidates, paid


def test_a_run_aborted_by_an_outage_resumes_once_the_endpoint_is_fixed(
    tmp_path, scripted_server, capsys
):
    # The same project, run once without an outage: what the resumed run must end up with.
    scripted_server.responder = never_perfect
    calm = make_project(tmp_path / "calm", scripted_server.url, budget=60)
    assert main(["-C", str(calm), "run"]) == 0
    *_, calm_proposals, calm_candidates, calm_paid = _rows(calm)

    outage = Outage(after=20)  # the seed's val items and a first proposal, then down
    scripted_server.responder = outage
    first = scripted_server.request_count
    project = make_project(tmp_path / "p", scripted_server.url, budget=60)
    assert main(["-C", str(project), "run"]) == 2
    err = capsys.readouterr().err
    assert "evaluations failed" in err
    assert f"at {scripted_server.url}" in err  # the endpoint that failed, by its URL
    assert "Fix the model's endpoint" in err and "then resume with `skynet run --resume" in err
    run_id, status, _, errors, *_ = _rows(project)
    assert status == "aborted" and errors >= 5

    outage.down = False  # the endpoint is back
    before = scripted_server.request_count
    assert main(["-C", str(project), "run", "--resume", run_id]) == 0
    assert scripted_server.request_count > before  # the failed items were asked again
    _, status, _, errors, proposals, candidates, paid = _rows(project)
    assert status == "finished" and errors == 0
    # The same run as without the outage: the same candidates and proposals, recorded once,
    # and every task reply paid once (the calm run's own count).
    assert candidates == calm_candidates
    assert proposals == calm_proposals
    assert paid == calm_paid
    # No reflection prompt was paid twice: the resumed run replayed the cached ones (a prompt
    # whose examples had failed in the outage is another prompt, asked once).
    reflections = Counter(
        (r["messages"][-1]["content"], r.get("temperature"), r.get("seed"))  # prompt and draw
        for r in scripted_server.requests[first:]
        if is_reflection(r)
    )
    assert max(reflections.values()) == 1


# Slow on the model's long answers only: the self-test's answer key and null control pass.
SLOW_METRIC = """
import time

def score(input, output, expected=None):
    if "history" in output:
        time.sleep(0.3)
    named = expected["capital"].lower() in output.lower()
    return float(named), {"feedback": "right" if named else "name the capital"}
"""


def test_a_run_aborted_by_metric_time_outs_resumes_with_a_raised_time_s(
    tmp_path, scripted_server, capsys
):
    # The time-out's advice (raise metric.time_s, then resume) must work: the time-outs recorded
    # under the lower limit are scored again, their task replies replayed, not paid again.
    scripted_server.responder = task_responder
    project = make_project(tmp_path / "p", scripted_server.url, budget=24)
    (project / "metric.py").write_text(SLOW_METRIC)
    assert main(["-C", str(project), "run", "--set", "metric.time_s=0.05"]) == 2
    err = capsys.readouterr().err
    assert "ran longer than 0.05 s" in err and "Fix the metric or the artifact" in err
    run_id, status, _, errors, *_ = _rows(project)
    assert status == "aborted" and errors >= 5

    # Resumed with the same limit, the time-outs stand (nothing changed that would help).
    assert main(["-C", str(project), "run", "--resume", run_id, "--set", "metric.time_s=0.05"]) == 2
    capsys.readouterr()
    assert _rows(project)[3] == errors

    assert main(["-C", str(project), "run", "--resume", run_id, "--set", "metric.time_s=5"]) == 0
    _, status, _, errors, _, _, paid = _rows(project)
    assert status == "finished" and errors == 0
    task = [r for r in scripted_server.requests if not is_reflection(r)]
    distinct = {(json.dumps(r["messages"]), r.get("temperature"), r.get("seed")) for r in task}
    assert paid == len(distinct)  # each task reply paid once across the three processes
