"""A model that misbehaves the way real endpoints do (issue 14): 20% of requests answered 429
with a Retry-After, 10% a 500, 5% left hanging past the time-out, each request's fate drawn from a
seeded generator, and no prompt failing more than twice in a row (so the model layer's retries
always get through). The run finishes with the same candidates, evaluations and best as a run on
a calm endpoint, records no error, and pays each reply once."""

from __future__ import annotations

import random
import threading
from collections import Counter

import pytest
from projects import make_project, never_perfect

from skynet.cli import main
from skynet.runs.store import RunStore, runs_db_path
from skynet.testing import fail, hang

pytestmark = pytest.mark.slow


class FaultMix:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.failed: Counter[str] = Counter()  # prompt -> faults in a row
        self.faults: Counter[str] = Counter()  # kind -> how many were served

    def __call__(self, body):
        prompt = repr(body["messages"])
        with self.lock:
            draw = self.rng.random()
            kind = (
                "429" if draw < 0.20 else "500" if draw < 0.30 else "hang" if draw < 0.35 else None
            )
            if kind is None or self.failed[prompt] >= 2:
                self.failed[prompt] = 0
                kind = None
            else:
                self.failed[prompt] += 1
                self.faults[kind] += 1
        if kind == "429":
            return fail(429, retry_after=0.05)
        if kind == "500":
            return fail(500)
        if kind == "hang":
            return hang(2.0)  # the endpoint's timeout_s (1 s) fires first
        return never_perfect(body)


def _outcome(project):
    with RunStore(runs_db_path(project), readonly=True) as store:
        (run,) = store.list_runs()
        status, best = run.status, run.best_candidate_id
        evaluations = sorted(
            (e.candidate_id, e.item_id, e.score, e.error) for e in store.evaluations(run.id)
        )
        candidates = [c.id for c in store.candidates(run.id)]
        calls = store.calls(run.id)
        paid = Counter(c.role for c in calls if c.ok and not c.cached)
        failed = sum(1 for c in calls if not c.ok)
    return status, best, evaluations, candidates, dict(paid), failed


def test_a_run_through_429s_500s_and_hangs_ends_as_a_calm_one(tmp_path, scripted_server, capsys):
    scripted_server.responder = never_perfect  # a perfect best would stop it before the faults
    calm = make_project(tmp_path / "calm", scripted_server.url, budget=40)
    assert main(["-C", str(calm), "run"]) == 0

    mix = FaultMix(seed=7)
    scripted_server.responder = mix
    project = make_project(tmp_path / "p", scripted_server.url, budget=40)
    toml = project / "skynet.toml"
    toml.write_text(toml.read_text().replace("timeout_s = 10", "timeout_s = 1"))
    assert main(["-C", str(project), "run"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert mix.faults["429"] >= 5 and mix.faults["500"] >= 3 and mix.faults["hang"] >= 1

    status, best, evaluations, candidates, paid, failed = _outcome(project)
    calm_status, calm_best, calm_evaluations, calm_candidates, calm_paid, _ = _outcome(calm)
    assert status == calm_status == "finished"
    assert all(error is None for *_, error in evaluations)  # every fault was retried through
    assert (best, evaluations, candidates) == (calm_best, calm_evaluations, calm_candidates)
    assert paid == calm_paid  # each reply paid once, as on the calm endpoint
    assert failed == 0  # a retried attempt is not a failed call
