"""benchmarks/sweep.py, the issue-27 sweep of bad inputs and faults, classifies what it sees:
a real one-line refusal, a synthetic traceback, a synthetic hang (killed at its time-out) and a
fault survived with its check held. The sweep's numbers are only as good as its classes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _load():
    spec = importlib.util.spec_from_file_location("sweep", BENCHMARKS / "sweep.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["sweep"] = module  # its dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


sweep = _load()
Case = sweep.Case

CASES = [
    (Case(id="clean-bad-toml", project="fresh", setup=sweep.write("skynet.toml", "[data\n")), "one line"),
    (Case(id="synthetic-traceback", command=(sys.executable, "-c", "raise ValueError('x')")), "traceback"),
    (Case(id="synthetic-hang", command=(sys.executable, "-c", "import time; time.sleep(30)"), timeout=1), "hang"),
    (Case(id="synthetic-silent", command=(sys.executable, "-c", "pass")), "silent"),
    (
        Case(
            id="synthetic-survived",
            command=(sys.executable, "-c", "open('done', 'w')"),
            expect="survive",
            check=lambda folder: None if (folder / "done").exists() else "no file",
        ),
        "survived",
    ),
    (
        Case(
            id="synthetic-two-lines",
            command=(sys.executable, "-c", "import sys; sys.stderr.write('a\\nskynet: error: b\\n'); sys.exit(2)"),
        ),
        "other",
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> Iterator[object]:
    """The sweep's server and scratch folder (no recorded project: the cases here need none)."""
    made = sweep.Sweep(tmp_path_factory.mktemp("sweep"))
    try:
        yield made
    finally:
        made.close()


@pytest.mark.slow
@pytest.mark.parametrize("case, expected", CASES, ids=[c.id for c, _ in CASES])
def test_the_sweep_classifies_a_case(harness, case, expected):
    outcome = sweep.run_case(case, harness)
    assert outcome.outcome == expected, outcome
    if expected == "one line":
        assert outcome.exit_code == 2 and outcome.first_line.startswith("skynet: error: ")
    if expected == "hang":
        assert outcome.exit_code is None and outcome.seconds < 10


def test_the_totals_line_counts_clean_cases():
    outcomes = [
        sweep.Outcome("a", "one line", 2, 1.0, ""),
        sweep.Outcome("b", "survived", 0, 1.0, ""),
        sweep.Outcome("c", "traceback", 1, 1.0, ""),
        sweep.Outcome("d", "hang", None, 1.0, ""),
    ]
    line = sweep.totals(outcomes)
    assert line.startswith("one clear line: 2 of 4 (50%) · traceback 1 · silent 0 · hang 1")


def test_the_sweep_has_at_least_150_distinct_cases():
    ids = [c.id for c in sweep.all_cases()]
    assert len(ids) == len(set(ids)) >= 150
