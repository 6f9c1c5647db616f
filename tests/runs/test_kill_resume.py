"""SIGKILL at five moments, then resume: the run ends with the same candidates, evaluations and
proposals as a run never killed, and every call recorded as paid is paid once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter

import pytest
from projects import make_project, never_perfect

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path

pytestmark = pytest.mark.slow


def _state(project):
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        run_id, status = run.id, run.status
        evaluations = sorted(
            (e.candidate_id, e.item_id, e.score, e.error) for e in store.evaluations(run_id)
        )
        proposals = Counter((p.status, p.detail, p.text) for p in store.proposals(run_id))
        candidates = sorted(c.id for c in store.candidates(run_id))
        paid = Counter(
            (c.role, c.item_id)
            for c in store.calls(run_id)
            if c.ok and not c.cached and c.role == "task"
        )
    return run_id, status, evaluations, proposals, candidates, paid


def _project(folder, url, engine):
    project = make_project(folder, url, budget=60)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace('name = "gepa"', f'name = "{engine}"', 1))
    return project


# never_perfect: the run spends its budget (a perfect best would stop it before some moments).
# gepa-async (Auto's engine for prompts) evaluates beside its reflections: killed mid-way, its
# resumed run must still come to the same run.
@pytest.mark.parametrize(
    ("engine", "moment"),  # moment: the server request that kills it
    [*(("gepa", m) for m in (3, 9, 17, 26, 38)), *(("gepa-async", m) for m in (4, 14, 24))],
)
def test_a_run_killed_at_any_moment_resumes_to_the_unkilled_runs_result(
    tmp_path, scripted_server, engine, moment
):
    scripted_server.responder = never_perfect
    calm = _project(tmp_path / "calm", scripted_server.url, engine)
    assert main(["-C", str(calm), "run"]) == 0
    _, _, calm_evaluations, calm_proposals, calm_candidates, calm_paid = _state(calm)

    project = _project(tmp_path / "p", scripted_server.url, engine)
    process: subprocess.Popen[bytes] | None = None
    seen = 0
    lock = threading.Lock()

    def killer(body):
        nonlocal seen
        with lock:
            seen += 1
            if seen == moment and process is not None:
                os.kill(process.pid, signal.SIGKILL)  # mid-request: this reply never arrives
        return never_perfect(body)

    scripted_server.responder = killer
    process = subprocess.Popen(
        [sys.executable, "-m", "skynet.cli", "-C", str(project), "run"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert process.wait(timeout=120) == -signal.SIGKILL
    run_id, status, *_ = _state(project)
    assert status == "running"  # killed: no chance to say otherwise

    scripted_server.responder = never_perfect
    assert main(["-C", str(project), "run", "--resume", run_id]) == 0
    _, status, evaluations, proposals, candidates, paid = _state(project)
    assert status == "finished"
    assert candidates == calm_candidates
    assert evaluations == calm_evaluations
    assert proposals == calm_proposals
    assert paid == calm_paid  # each task reply recorded as paid once, across the kill
