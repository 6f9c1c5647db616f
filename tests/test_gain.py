"""skynet.gain's statistics, checked against simulated paired samples with a known true gain
(no model): the 95% interval covers the truth about 95% of the time, a gain of 0 is rarely
called better, a real gain of 0.3 on 40 items usually is; and the exact parts against scipy.

Every simulation draws from a seeded numpy generator, so each figure is the same on every run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from skynet.gain import (
    BETTER,
    NO_DIFFERENCE,
    WORSE,
    Gain,
    detectable_gain,
    items_needed,
    judge_gain,
    paired_gain,
    split_notes,
)

SAMPLES = 1_000


def _binary(rng: np.random.Generator, n: int, *, right: float, fixes: float, breaks: float):
    """0/1 scores of a seed and a best on n items: the seed is right with probability `right`;
    the best fixes each item the seed got wrong with probability `fixes` and breaks each it got
    right with probability `breaks`. The true gain is (1 - right) * fixes - right * breaks."""
    seed = (rng.random(n) < right).astype(float)
    u = rng.random(n)
    best = np.where(seed == 0, u < fixes, u >= breaks).astype(float)
    return seed, best


def _graded(rng: np.random.Generator, n: int, *, weight: float, alpha: float, beta: float):
    """Scores in [0, 1]: the seed's from Beta(2, 3) (mean 0.4); the best's a mix, per item, of
    the seed's own score and a fresh Beta(alpha, beta) draw, so the two are correlated as real
    candidates' scores are. The true gain is weight * (alpha / (alpha + beta) - 0.4)."""
    seed = rng.beta(2, 3, n)
    best = (1 - weight) * seed + weight * rng.beta(alpha, beta, n)
    return seed, best


def _simulate(draw, truth: float) -> tuple[float, float]:
    """The share of SAMPLES draws whose interval covers `truth`, and whose verdict is better."""
    covered = better = 0
    for _ in range(SAMPLES):
        gain = paired_gain(*draw(), split="test")
        assert gain.low is not None and gain.high is not None
        covered += gain.low <= truth <= gain.high
        better += gain.verdict == BETTER
    return covered / SAMPLES, better / SAMPLES


# --------------------------------------------------------------------------------------------
# Simulations (the proof): coverage, false "better", power.

# Seed right on 40%; the best fixes 7/12 of the rest (35% of all items) and breaks 1/8 of
# those (5% of all items): a true gain of 0.3.
_REAL = {"right": 0.4, "fixes": 7 / 12, "breaks": 1 / 8}
# As many fixed as broken (15% of all items each way): a true gain of 0.
_NULL = {"right": 0.5, "fixes": 0.3, "breaks": 0.3}


@pytest.mark.slow
@pytest.mark.parametrize("n", [26, 40])
def test_the_interval_covers_a_true_0_1_gain_95_percent_of_the_time(n):
    rng = np.random.default_rng(26)
    covered, _ = _simulate(lambda: _binary(rng, n, **_REAL), truth=0.3)
    assert 0.93 <= covered <= 0.97, covered


@pytest.mark.slow
def test_the_interval_covers_a_true_graded_gain_95_percent_of_the_time():
    rng = np.random.default_rng(26)
    # A fresh draw from Beta(3, 2) (mean 0.6) for half of each score: a true gain of 0.1.
    covered, _ = _simulate(lambda: _graded(rng, 40, weight=0.5, alpha=3, beta=2), truth=0.1)
    assert 0.93 <= covered <= 0.97, covered


@pytest.mark.slow
def test_no_true_0_1_gain_is_rarely_called_better():
    rng = np.random.default_rng(26)
    covered, better = _simulate(lambda: _binary(rng, 40, **_NULL), truth=0.0)
    assert better <= 0.035, better
    assert 0.93 <= covered <= 0.97, covered


@pytest.mark.slow
def test_no_true_graded_gain_is_rarely_called_better():
    rng = np.random.default_rng(26)
    # The fresh draw has the seed's own distribution: each difference is symmetric about 0,
    # the sign-flip test's null exactly.
    covered, better = _simulate(lambda: _graded(rng, 40, weight=0.5, alpha=2, beta=3), truth=0.0)
    assert better <= 0.035, better
    assert 0.93 <= covered <= 0.97, covered


@pytest.mark.slow
def test_a_true_gain_of_0_3_on_40_items_is_called_better_at_least_80_percent_of_the_time():
    # Paired as real candidates are: the best keeps most of what the seed got right. Under
    # independent scores (seed right on 35%, best on 65%: the worst case for pairing, every
    # item a coin of its own) the power at n = 40 is only about 0.69 (measured: 0.67-0.69).
    rng = np.random.default_rng(26)
    _, better = _simulate(lambda: _binary(rng, 40, **_REAL), truth=0.3)
    assert better >= 0.80, better


# --------------------------------------------------------------------------------------------
# Exact checks.


@pytest.mark.parametrize(("up", "down", "same"), [(8, 2, 16), (3, 0, 23), (5, 9, 12), (1, 1, 0)])
def test_mcnemar_p_is_the_exact_binomial_test_on_the_discordant_items(up, down, same):
    seed = [0.0] * up + [1.0] * down + [1.0] * (same // 2) + [0.0] * (same - same // 2)
    best = [1.0] * up + [0.0] * down + [1.0] * (same // 2) + [0.0] * (same - same // 2)
    gain = paired_gain(seed, best, split="test")
    assert gain.p_value == pytest.approx(stats.binomtest(up, up + down).pvalue, rel=1e-12)
    assert gain.method.startswith("McNemar's exact test")
    assert gain.n == up + down + same
    assert gain.estimate == pytest.approx((up - down) / gain.n)


def test_mcnemar_p_by_hand():
    # 8 items up, 2 down: 2 * P(X <= 2), X ~ Binomial(10, 1/2) = 2 * (1 + 10 + 45) / 1024.
    gain = paired_gain([0.0] * 8 + [1.0] * 2, [1.0] * 8 + [0.0] * 2, split="test")
    assert gain.p_value == pytest.approx(112 / 1024, rel=1e-12)
    assert gain.verdict == NO_DIFFERENCE  # p > 0.05, though 8 of 10 moved up


@pytest.mark.parametrize(
    "scores", [[0.0, 1.0, 1.0, 0.0, 1.0], [0.2, 0.7, 0.7, 0.25, 1.0]], ids=["0/1", "graded"]
)
def test_an_all_equal_sample_is_no_difference_detected(scores):
    gain = paired_gain(scores, list(scores), split="test")
    assert gain.verdict == NO_DIFFERENCE
    assert (gain.estimate, gain.low, gain.high, gain.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_every_item_up_by_the_same_graded_amount_is_better():
    # No spread, so no t interval: the interval is the point, and the sign-flip test's p is
    # that of the one most extreme pattern out of 2**10, both tails.
    seed = [0.1 * i for i in range(10)]
    gain = paired_gain(seed, [s + 0.05 for s in seed], split="test")
    assert gain.verdict == BETTER
    assert gain.p_value == pytest.approx(2.0**-9)
    # Float arithmetic leaves a hair of spread (0.15 - 0.1 is not 0.05 exactly).
    assert gain.low == pytest.approx(0.05) and gain.high == pytest.approx(0.05)


def test_a_clear_loss_is_worse():
    gain = paired_gain([1.0] * 30, [0.0] * 20 + [1.0] * 10, split="test")
    assert gain.verdict == WORSE
    assert gain.high is not None and gain.high < 0


def test_the_exact_sign_flip_test_for_few_graded_items():
    # 2**8 sign patterns: every one is enumerated, and p is the share at least as extreme.
    d = np.array([0.3, 0.2, 0.25, 0.1, 0.4, -0.05, 0.15, 0.35])
    seed = np.full(8, 0.3)
    gain = paired_gain(seed, seed + d, split="test")
    signs = np.array(np.meshgrid(*[[-1, 1]] * 8)).reshape(8, -1).T
    means = (signs * d).mean(axis=1)
    expected = float(np.mean(np.abs(means) >= abs(d.mean()) - 1e-12))
    assert "exact" in gain.method
    assert gain.p_value == pytest.approx(expected)


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [
        ([0.0, 1.0], [1.0], "differ in length: 2 and 1"),
        ([0.0, math.nan], [1.0, 1.0], "finite"),
        ([0.0, 1.0], [math.inf, 1.0], "finite"),
    ],
)
def test_bad_scores_raise_value_error(a, b, message):
    with pytest.raises(ValueError, match=message):
        paired_gain(a, b, split="test")


def test_no_items():
    gain = paired_gain([], [], split="test")
    assert gain.n == 0 and gain.estimate is None and gain.detectable is None
    assert gain.describe() == "no test item has a counted score for both"


def test_describe():
    better = Gain(
        split="test",
        n=26,
        estimate=0.231,
        low=0.08,
        high=0.38,
        p_value=0.004,
        verdict=BETTER,
        detectable=0.2,
        method="McNemar's exact test; t interval",
    )
    assert better.describe() == "+0.231 [+0.080, +0.380] on 26 test items, p = 0.004: better"
    unsure = Gain(
        split="val",
        n=1,
        estimate=-0.02,
        low=-0.3,
        high=0.26,
        p_value=0.0004,
        verdict=NO_DIFFERENCE,
        detectable=0.38851,
        method="",
    )
    assert unsure.describe() == (
        "-0.020 [-0.300, +0.260] on 1 val item, p = < 0.001: no difference detected "
        "(this split detects gains of 0.39 or more at 80% power)"
    )


def test_detectable_gain_and_items_needed():
    # (z_0.975 + z_0.80) * sqrt(0.5 / 26) = 2.8016 * 0.13868.
    assert detectable_gain(26) == pytest.approx(0.388510, abs=1e-6)
    assert detectable_gain(26, variance=0.31) == pytest.approx(0.305913, abs=1e-6)
    assert detectable_gain(0) is None
    # The inverse: the fewest items for 0.10 (392 are a hair short).
    assert items_needed(0.10) == 393
    assert detectable_gain(393) <= 0.10 < detectable_gain(392)  # type: ignore[operator]
    assert items_needed(detectable_gain(26)) == 26  # type: ignore[arg-type]


def test_split_notes():
    assert split_notes(val=400, test=400) == []
    assert split_notes(val=400, test=26) == [
        "the test split's 26 items detect gains of 0.39 or more at 80% power (0/1 scores, half "
        "the items changing); about 393 items detect 0.10"
    ]
    none, val = split_notes(val=3, test=0)
    assert none.startswith("no test split: the run's gain cannot be confirmed on held-out items")
    assert val.startswith("the val split's 3 items are too few to detect any gain at 80% power")


def test_as_dict_from_dict_round_trip():
    rng = np.random.default_rng(26)
    gain = paired_gain(*_binary(rng, 40, **_REAL), split="test", val_estimate=0.5)
    data = gain.as_dict()
    assert set(data) == {
        "split",
        "n",
        "estimate",
        "low",
        "high",
        "p_value",
        "verdict",
        "detectable",
        "method",
        "a_mean",
        "b_mean",
        "val_estimate",
        "raw_estimate",
    }
    assert Gain.from_dict(data) == gain
    assert Gain.from_dict({**data, "a_field_from_a_newer_skynet": 1}) == gain


# --------------------------------------------------------------------------------------------
# A judge's gain: its decisions err (tpr, tnr < 1); the labelled items measure how much.


def _judged(rng: np.random.Generator, truth: np.ndarray, tpr: float, tnr: float) -> np.ndarray:
    """A judge's 0/1 decisions on outputs whose true rightness is `truth`."""
    u = rng.random(len(truth))
    return np.where(truth == 1, u < tpr, u >= tnr).astype(float)


def _judge_sample(rng, n: int, labelled: int, *, tpr=0.9, tnr=0.85, real=_REAL):
    seed, best = _binary(rng, n, **real)
    human = (rng.random(labelled) < 0.55).astype(float)
    pairs = list(zip(_judged(rng, human, tpr, tnr) == 1, human == 1, strict=True))
    return _judged(rng, seed, tpr, tnr), _judged(rng, best, tpr, tnr), pairs


@pytest.mark.slow
@pytest.mark.parametrize(("n", "labelled"), [(26, 30), (40, 40), (100, 60)])
def test_the_judge_corrected_interval_covers_the_true_gain_95_percent_of_the_time(n, labelled):
    """In true accuracy: the judge (tpr 0.9, tnr 0.85) sees a gain of 0.3 as 0.225; the
    corrected interval covers 0.3, where the judge's own interval mostly would not."""
    rng = np.random.default_rng(27)
    covered = raw_covered = 0
    for _ in range(SAMPLES):
        a, b, pairs = _judge_sample(rng, n, labelled)
        gain = judge_gain(a, b, pairs, split="test")
        covered += gain.low <= 0.3 <= gain.high
        raw = paired_gain(a, b, split="test")
        raw_covered += raw.low <= 0.3 <= raw.high
    assert 0.93 <= covered / SAMPLES <= 0.975, covered / SAMPLES
    assert raw_covered < covered


@pytest.mark.slow
def test_no_true_gain_under_a_judge_is_rarely_called_better():
    rng = np.random.default_rng(27)
    better = sum(
        judge_gain(*_judge_sample(rng, 40, 40, real=_NULL), split="test").verdict == BETTER
        for _ in range(SAMPLES)
    )
    assert better / SAMPLES <= 0.035, better / SAMPLES


def test_judge_gain_by_hand():
    # 10 items: the judge passes the best on 6 more than the seed, fails it on 1 more; labels:
    # 8 right (the judge passes 6: tpr 0.75), 4 wrong (it fails 3: tnr 0.75). J = 0.5.
    a = [0.0] * 7 + [1.0] * 3
    b = [1.0] * 6 + [0.0] + [1.0, 1.0, 0.0]
    pairs = [(True, True)] * 6 + [(False, True)] * 2 + [(False, False)] * 3 + [(True, False)]
    gain = judge_gain(a, b, pairs, split="test")
    raw = paired_gain(a, b, split="test")
    assert raw.estimate == pytest.approx(0.5) and gain.raw_estimate == pytest.approx(0.5)
    assert gain.estimate == pytest.approx(min(1.0, 0.5 / 0.5))
    assert gain.p_value == raw.p_value == pytest.approx(stats.binomtest(6, 7).pvalue)
    d = np.asarray(b) - np.asarray(a)
    var_j = 0.75 * 0.25 / 8 + 0.75 * 0.25 / 4
    half = stats.t.ppf(0.975, 9) * math.sqrt(d.var(ddof=1) / 10 / 0.25 + 1.0 * var_j / 0.25)
    assert gain.low == pytest.approx(1.0 - half) and gain.high == 1.0
    # Each side in true accuracy: (q + tnr - 1) / J, within [0, 1].
    assert gain.a_mean == pytest.approx((0.3 + 0.75 - 1) / 0.5)
    assert gain.b_mean == 1.0  # (0.8 - 0.25) / 0.5 = 1.1, clipped
    assert "tpr + tnr - 1 = 0.75 + 0.75 - 1 = 0.50 (12 labelled items)" in gain.method


@pytest.mark.parametrize(
    ("pairs", "why"),
    [
        ([(True, True)] * 5, "no wrong output among the labelled items"),
        ([(False, False)] * 5, "no right output among the labelled items"),
        ([(False, True), (True, False)] * 3, "no better than chance on its labels"),
    ],
    ids=["all-right", "all-wrong", "chance"],
)
def test_a_judge_whose_error_cannot_be_measured_keeps_its_own_figure(pairs, why):
    a, b = [0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0]
    gain = judge_gain(a, b, pairs, split="test")
    raw = paired_gain(a, b, split="test")
    assert gain.estimate == raw.estimate and gain.low == raw.low and gain.raw_estimate is None
    assert "the judge's error not corrected (" in gain.method and why in gain.method


def test_judge_gain_refuses_graded_scores():
    with pytest.raises(ValueError, match="must be 0 or 1"):
        judge_gain([0.5, 0.2], [0.7, 0.9], [(True, True), (False, False)], split="test")
