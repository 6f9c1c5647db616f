"""benchmarks/long_run.py, the issue-27 long-run figures, on a short run: every figure it promises
is printed as a positive number, and the scripted model keeps the run going to its budget (a run
that stopped early would make the late-over-early ratio meaningless)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "long_run.py"
CALLS = 60


@pytest.fixture(scope="module")
def printed() -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), "--calls", str(CALLS)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "key",
    ["rss_start_mb", "rss_end_mb", "rss_peak_mb", "rss_end_over_start", "calls_per_s_early",
     "calls_per_s_late", "late_over_early", "runs_db_mb", "cache_db_mb", "wall_s"],
    ids=str,
)  # fmt: skip
def test_figure_printed(printed: str, key: str) -> None:
    found = re.search(rf"^{key}\s+([0-9.]+)", printed, re.M)
    assert found, f"{key} missing from:\n{printed}"
    assert float(found.group(1)) > 0


@pytest.mark.slow
def test_run_spends_its_budget(printed: str) -> None:
    found = re.search(r"run: (\d+) evaluations recorded.*stopped by: (.*)$", printed, re.M)
    assert found, printed
    assert int(found.group(1)) >= CALLS
    assert found.group(2) == f"max_metric_calls = {CALLS} reached"
