"""benchmarks/evaluate.py (skynet.evaluate against dspy.Evaluate, same threads, same server) on a
short run: it prints the ratio line, and both sides scored every row alike with rows in flight at
once. No time is asserted: the ratio is the benchmark's figure, measured where it runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "evaluate.py"
ROWS = 6


@pytest.fixture(scope="module")
def printed() -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--latency", "0.05", "--rows", str(ROWS)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_the_ratio_is_printed(printed: str) -> None:
    found = re.search(
        r"^ratio skynet/dspy: ([0-9.]+)x \(target <= 1\.10: (met|missed)\)$", printed, re.M
    )
    assert found, printed
    assert float(found.group(1)) > 0


# (case, the side's line)
SIDES = [("dspy", "dspy.Evaluate"), ("skynet", "skynet.evaluate")]


@pytest.mark.slow
@pytest.mark.parametrize(("case", "side"), SIDES, ids=[c[0] for c in SIDES])
def test_each_side_scores_every_row_with_rows_in_flight_at_once(printed: str, case, side) -> None:
    found = re.search(
        rf"^  {re.escape(side)}\s+[0-9.]+ s  mean ([0-9.]+)  requests (\d+)  most in flight (\d+)$",
        printed,
        re.M,
    )
    assert found, printed
    mean, requests, most = float(found.group(1)), int(found.group(2)), int(found.group(3))
    assert (mean, requests) == (1.0, ROWS)
    assert most > 1
