"""An optimization run's own figures (the progress line's best val, RunOutcome.seed_val and
best_val) count a candidate's crash as 0 and leave a metric fault out, as the report does."""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path

import pytest
from projects import make_sum_code_project

from skynet.project import open_project
from skynet.runner import run
from skynet.runs import summarize
from skynet.testing import reply

pytestmark = pytest.mark.slow

# Right on every item, but: a float for n = 1 (which the metric cannot grade: a metric fault)
# and a crash on n > 6 (the candidate's own failure).
SEED = textwrap.dedent(
    """
    def run(input):
        n = input["n"]
        if n > 6:
            raise RuntimeError("too big")
        if n == 1:
            return 1.0
        return n * (n + 1) // 2
    """
)


def make_project(root: Path, server_url: str) -> Path:
    return make_sum_code_project(
        root,
        code=SEED,
        metric="""
            def score(input, output, expected=None):
                if isinstance(output, float):
                    raise ValueError("cannot grade a float")
                right = output == expected["total"]
                return float(right), {"feedback": "right" if right else "wrong"}
            """,
        toml=f"""
            timeout_s = 10

            [engine]
            name = "gepa"

            [budget]
            max_metric_calls = 12

            [models]
            reflection = "openai/skynet-test"

            [models.endpoints."openai/skynet-test"]
            api_base = "{server_url}"
            """,
    )


def test_the_runs_val_mean_counts_a_crash_as_0_and_leaves_a_metric_fault_out(
    tmp_path, scripted_server
):
    # Reflection proposes the seed again: no other candidate reaches val, so the seed's mean is
    # the best val the run shows.
    scripted_server.responder = lambda body: reply(f"```python\n{SEED}```")
    project = open_project(make_project(tmp_path / "p", scripted_server.url))
    stream = io.StringIO()
    outcome = run(project, out=stream)
    # Val items n1 (metric fault), n3, n5 (right), n7, n9, n11 (crashes): 2 of 5 counted.
    # Left out, the crashes would make it 1.000; GEPA's own count (every error 0) is 0.333.
    assert outcome.seed_val == pytest.approx(2 / 5)
    assert outcome.best_val == pytest.approx(2 / 5)
    shown = re.findall(r"best val (\S+)", stream.getvalue())
    assert shown and shown[-1] == "0.400"
    with project.open_store() as store:
        summary = summarize(store, outcome.run_id)
    assert summary.seed is not None and summary.seed.val_score == pytest.approx(2 / 5)
    assert (summary.seed.val_failures, summary.seed.val_left_out) == (3, {"metric": 1})
