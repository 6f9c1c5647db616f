"""PPI-corrected accuracy, checked against the ppi-python package (ppi_py) on several data sets."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from skynet import ConfigError
from skynet.scorers import PPIEstimate, judge_ppi


def data_set(seed, n, big_n, accuracy, judge_agreement, judge_bias=0.0):
    """Human labels and a noisy judge on n labelled and N unlabelled outputs."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n + big_n) < accuracy
    flip = rng.random(n + big_n) > judge_agreement
    judge = np.where(flip, ~truth, truth)
    judge |= rng.random(n + big_n) < judge_bias  # a lenient judge says "right" more often
    return judge[n:], judge[:n], truth[:n]


DATA_SETS = {
    "good judge": data_set(0, 40, 400, 0.7, 0.9),
    "lenient judge": data_set(1, 60, 1000, 0.5, 0.85, judge_bias=0.2),
    "poor judge": data_set(2, 30, 200, 0.6, 0.55),
    "small": data_set(3, 8, 25, 0.4, 0.8),
    "high accuracy": data_set(4, 100, 5000, 0.93, 0.95),
}


@pytest.mark.parametrize("lam", [0.0, 1.0, None], ids=["lam=0", "lam=1", "tuned"])
@pytest.mark.parametrize("name", sorted(DATA_SETS))
def test_estimate_and_interval_match_ppi_py(name, lam):
    unlabelled, labelled, human = DATA_SETS[name]
    got = judge_ppi(unlabelled.tolist(), labelled.tolist(), human.tolist(), alpha=0.05, lam=lam)
    y, yhat, yhat_u = human.astype(float), labelled.astype(float), unlabelled.astype(float)
    want = float(np.squeeze(ppi_mean_pointestimate(y, yhat, yhat_u, lam=lam)))
    low, high = (float(np.squeeze(v)) for v in ppi_mean_ci(y, yhat, yhat_u, alpha=0.05, lam=lam))
    assert got.estimate == pytest.approx(want, abs=1e-12)
    assert got.low == pytest.approx(max(0.0, low), abs=1e-12)
    assert got.high == pytest.approx(min(1.0, high), abs=1e-12)
    assert (got.n, got.N) == (len(human), len(unlabelled))
    assert got.judge_raw == pytest.approx(float(unlabelled.mean()))
    if lam is None:
        assert 0.0 <= got.lam <= 1.0
        # The tuned lam is ppi_py's: the estimate it gives, asked with that lam, is the same.
        again = ppi_mean_pointestimate(y, yhat, yhat_u, lam=got.lam)
        assert float(np.squeeze(again)) == pytest.approx(want)
    else:
        assert got.lam == lam


def test_a_good_judge_narrows_the_interval_and_lam_0_is_the_human_mean():
    unlabelled, labelled, human = DATA_SETS["good judge"]
    classical = judge_ppi(unlabelled, labelled, human, lam=0.0)
    tuned = judge_ppi(unlabelled, labelled, human)
    assert classical.estimate == pytest.approx(float(human.mean()))
    assert tuned.high - tuned.low < classical.high - classical.low
    assert tuned.lam > 0.5


def test_a_lenient_judge_is_corrected_toward_the_human_rate():
    unlabelled, labelled, human = DATA_SETS["lenient judge"]
    got = judge_ppi(unlabelled, labelled, human, lam=1.0)
    bias = float(labelled.mean() - human.mean())
    assert bias > 0.05  # the judge says "right" more often than the people do
    assert got.estimate == pytest.approx(got.judge_raw - bias)


@pytest.mark.parametrize("constant", [True, False])
def test_a_zero_variance_judge_takes_lam_0_and_says_so_without_dividing_by_zero(constant):
    human = [True, False, True, True, False, True, True, True]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by zero in numpy would warn
        got = judge_ppi([constant] * 50, [constant] * len(human), human)
    assert isinstance(got, PPIEstimate)
    assert got.lam == 0.0
    assert any("zero variance" in note for note in got.notes)
    y = np.array(human, dtype=float)
    low, high = ppi_mean_ci(
        y, np.full(len(y), float(constant)), np.full(50, float(constant)), alpha=0.05, lam=0.0
    )
    assert got.estimate == pytest.approx(y.mean())
    assert (got.low, got.high) == pytest.approx((max(0.0, float(low[0])), min(1.0, float(high[0]))))


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (([True], [True], [True]), {}, "at least 2"),
        (([], [True, False], [True, False]), {}, "no unlabelled"),
        (([True], [True, False], [True]), {}, "2 judge decisions on the labelled items but 1"),
        (([True], [True, False], [True, "yes"]), {}, "human_labels[1] is 'yes'"),
        (([True], [True, False], [True, False]), {"alpha": 1.5}, "alpha = 1.5"),
        (([True], [True, False], [True, False]), {"lam": 2.0}, "lam = 2.0"),
    ],
)
def test_bad_inputs_are_refused_with_what_and_the_fix(args, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        judge_ppi(*args, **kwargs)
