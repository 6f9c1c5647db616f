"""A candidate's mean: its own failures count as 0, metric and model faults are left out."""

from __future__ import annotations

import pytest

from skynet.evaluation import Result
from skynet.mean import mean_of, mean_of_results

OK1 = (1.0, None, True)
OK0 = (0.0, None, True)
CRASH = (None, "candidate", False)
METRIC = (None, "metric", False)
CONTRACT = (None, "contract", False)
TASK = (None, "task", False)


@pytest.mark.parametrize(
    ("outcomes", "value", "counted", "shown"),
    [
        ([OK1, OK0, OK1, OK1], 0.75, 4, "0.750"),
        ([OK1, OK1, OK1, CRASH], 0.75, 4, "0.750 (1 candidate failure as 0)"),
        ([OK1, OK1, OK1, METRIC], 1.0, 3, "1.000 (1 metric error left out)"),
        (
            [OK1, OK0, CONTRACT, TASK],
            0.5,
            2,
            "0.500 (1 contract error left out, 1 task error left out)",
        ),
        (
            [OK1, CRASH, METRIC, METRIC],
            0.5,
            2,
            "0.500 (1 candidate failure as 0, 2 metric errors left out)",
        ),
        ([CRASH, CRASH], 0.0, 2, "0.000 (2 candidate failures as 0)"),
        ([METRIC, METRIC], None, 0, "- (2 metric errors left out)"),
        ([(None, None, False)], None, 0, "- (1 unknown error left out)"),
        ([], None, 0, "-"),
    ],
)
def test_mean_of(outcomes, value, counted, shown):
    mean = mean_of(outcomes)
    assert mean.value == (None if value is None else pytest.approx(value))
    assert mean.counted == counted and mean.items == len(outcomes)
    assert mean.describe() == shown


def test_a_candidate_that_crashes_on_the_hard_items_does_not_beat_an_honest_one():
    easy = [Result(item_id=f"e{i}", score=1.0) for i in range(6)]
    honest = [*easy, Result(item_id="h0", score=1.0), Result(item_id="h1", score=0.0)]
    crasher = [
        *easy,
        *(Result(item_id=f"h{i}", error="crashed", error_kind="candidate") for i in range(2)),
    ]
    assert mean_of_results(honest).value == pytest.approx(7 / 8)
    # Left out, the crashes would have made it 1.0; as 0 it is 6/8.
    assert mean_of_results(crasher).value == pytest.approx(6 / 8)
