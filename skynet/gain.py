"""The gain of one candidate over another, paired by item, with its uncertainty.

A run's val figure chose its best candidate among many: it overstates the best by construction.
The figure a user can trust is the best minus the seed on items that chose nothing (the test
split), paired by item, with a 95% interval, a p-value and a verdict. Everything here is from
scipy.stats; nothing is hand-rolled but the arithmetic that joins it:

- the p-value: McNemar's exact test when every score is 0 or 1 (a two-sided binomial test on the
  items where the two disagree, `scipy.stats.binomtest`); otherwise a sign-flip permutation test
  of the mean difference (`scipy.stats.permutation_test`: every sign pattern up to 10 items,
  else 1,999 seeded resamples);
- the interval: Student's t on the per-item differences (`scipy.stats.ttest_1samp`), which keeps
  its 95% coverage from a few dozen items on, for 0/1 and graded scores alike (a percentile
  bootstrap covers less at these sizes);
- the verdict: "better" when the interval lies above 0 and the test agrees (p < 0.05), "worse"
  when below, else "no difference detected", with the smallest gain this many items could detect
  at 80% power (normal approximation, from the observed spread of the differences; for 0/1
  scores with no spread, as if half the items changed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

__all__ = [
    "BETTER",
    "NO_DIFFERENCE",
    "WORSE",
    "Gain",
    "detectable_gain",
    "items_needed",
    "judge_gain",
    "paired_gain",
    "split_notes",
]

BETTER = "better"
WORSE = "worse"
NO_DIFFERENCE = "no difference detected"
NO_ITEMS = "no items both counted"

LEVEL = 0.95
POWER = 0.80
# A 0/1 split's spread when nothing is known of it: half the items change between the two
# candidates (the variance of the difference is then 0.5; it is at most 1).
_UNKNOWN_BINARY_VARIANCE = 0.5
_PERMUTATIONS = 1_999


@dataclass(frozen=True, slots=True, kw_only=True)
class Gain:
    """b minus a, paired by item, on one split.

    Attributes:
        split: the items' split ("test" for a run's confirmation).
        n: items both candidates have a counted score on (a fault left out for one is left out
            for both; skynet.mean).
        estimate: the mean per-item difference, b minus a (None with no item).
        low, high: its 95% interval.
        p_value: two-sided, of no difference.
        verdict: "better", "worse" or "no difference detected".
        detectable: the smallest gain n items could detect at 80% power (a verdict "no
            difference detected" does not mean no difference: it means none this large).
        method: how p_value and the interval were found.
        a_mean, b_mean: each side's mean over the n items (judge_gain: each side's accuracy
            corrected for the judge's error).
        val_estimate: the same comparison on val, where the best was chosen (a run's gain
            only): the difference from `estimate` is the selection's optimism.
        raw_estimate: judge_gain only: the judge's own figure before the correction (None
            otherwise).
    """

    split: str
    n: int
    estimate: float | None
    low: float | None
    high: float | None
    p_value: float | None
    verdict: str
    detectable: float | None
    method: str
    a_mean: float | None = None
    b_mean: float | None = None
    val_estimate: float | None = None
    raw_estimate: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The documented JSON form (`skynet show --json`, the MLflow export)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Gain:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def describe(self) -> str:
        """One line: "+0.231 [+0.08, +0.38] on 26 test items, p = 0.004: better"."""
        if self.estimate is None or self.n == 0:
            return f"no {self.split} item has a counted score for both"
        interval = (
            f" [{self.low:+.3f}, {self.high:+.3f}]"
            if self.low is not None and self.high is not None
            else ""
        )
        p = "" if self.p_value is None else f", p = {_p(self.p_value)}"
        said = self.verdict
        if self.verdict == NO_DIFFERENCE and self.detectable is not None:
            said += f" (this split detects gains of {self.detectable:.2f} or more at 80% power)"
        return (
            f"{self.estimate:+.3f}{interval} on {self.n} {self.split} "
            f"item{'s' if self.n != 1 else ''}{p}: {said}"
        )


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def detectable_gain(n: int, *, variance: float = _UNKNOWN_BINARY_VARIANCE) -> float | None:
    """The smallest mean gain n paired items detect at 80% power (two-sided, 5%), when the
    per-item differences have this variance (default: 0/1 scores, half the items changing).
    None with no item."""
    from scipy.stats import norm

    if n <= 0:
        return None
    z = norm.ppf(1 - (1 - LEVEL) / 2) + norm.ppf(POWER)
    return float(z * math.sqrt(variance / n))


def items_needed(gain: float, *, variance: float = _UNKNOWN_BINARY_VARIANCE) -> int:
    """The fewest paired items that detect a mean gain this large at 80% power: detectable_gain
    inverted (the same normal approximation and default variance)."""
    from scipy.stats import norm

    z = norm.ppf(1 - (1 - LEVEL) / 2) + norm.ppf(POWER)
    # Rounding a hair down first: z**2 * variance / gain**2 can land a float's width above an
    # integer that already suffices.
    return max(1, math.ceil(z * z * variance / (gain * gain) - 1e-9))


# `skynet check` says when a split cannot see gains this small (0/1 scores).
CHECK_GAIN = 0.10


def split_notes(*, val: int, test: int) -> list[str]:
    """`skynet check`'s notes on the split sizes: a test split too small to detect gains under
    CHECK_GAIN at 80% power (0/1 scores, half the items changing), or none; the same for val,
    whose noise the search mistakes for gains."""
    notes = []
    if test == 0:
        notes.append(
            "no test split: the run's gain cannot be confirmed on held-out items; add test items "
            "([data] split or a test file)"
        )
    for split, n in (("test", test), ("val", val)):
        smallest = detectable_gain(n)
        if smallest is None or smallest <= CHECK_GAIN:
            continue
        # Past 1 no 0/1 gain is large enough: the sentence says so rather than "1.40 or more".
        sees = (
            f"detect gains of {smallest:.2f} or more"
            if smallest <= 1
            else "are too few to detect any gain"
        )
        notes.append(
            f"the {split} split's {n} item{'s' if n != 1 else ''} {sees} at 80% power "
            f"(0/1 scores, half the items changing); about {items_needed(CHECK_GAIN)} items "
            f"detect {CHECK_GAIN:.2f}"
        )
    return notes


def paired_gain(
    a: Sequence[float],
    b: Sequence[float],
    *,
    split: str,
    val_estimate: float | None = None,
    seed: int = 0,
) -> Gain:
    """b minus a on the same items (a[i] and b[i] are one item's scores).

    Raises:
        ValueError: a and b differ in length, or hold a non-finite score.
    """
    import numpy as np
    from scipy import stats

    if len(a) != len(b):
        raise ValueError(f"paired scores differ in length: {len(a)} and {len(b)}")
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired scores must be finite numbers")
    n = len(x)
    binary = bool(np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all())
    if n == 0:
        return Gain(
            split=split,
            n=0,
            estimate=None,
            low=None,
            high=None,
            p_value=None,
            verdict=NO_ITEMS,
            detectable=None,
            method="",
            val_estimate=val_estimate,
        )
    d = y - x
    estimate = float(d.mean())
    spread = float(d.var(ddof=1)) if n > 1 else 0.0
    if spread < 1e-12 * max(1.0, estimate * estimate):
        spread = 0.0  # every item moved alike: float rounding is no spread

    if binary:
        up, down = int((d > 0).sum()), int((d < 0).sum())
        p_value = 1.0 if up + down == 0 else float(stats.binomtest(up, up + down).pvalue)
        method = "McNemar's exact test; t interval"
    elif spread == 0.0:
        p_value = 1.0 if estimate == 0 else float(2.0 ** (1 - n))  # every sign pattern alike
        method = "sign-flip permutation test; t interval"
    else:
        exact = 2**n <= _PERMUTATIONS + 1
        result = stats.permutation_test(
            (d,),
            _mean,
            permutation_type="samples",
            vectorized=True,
            n_resamples=2**n if exact else _PERMUTATIONS,  # 2**n: every sign pattern
            rng=np.random.default_rng(seed),
        )
        p_value = float(min(1.0, result.pvalue))
        method = "sign-flip permutation test" + (" (exact)" if exact else "") + "; t interval"

    if n > 1 and spread > 0.0:
        interval = stats.ttest_1samp(d, 0.0).confidence_interval(LEVEL)
        low, high = float(interval.low), float(interval.high)
        if binary:  # no difference of 0/1 scores is past 1 either way
            low, high = max(-1.0, low), min(1.0, high)
    else:
        low = high = estimate  # no spread: every item moved by the same amount
    verdict = _verdict(p_value, low, high)
    if spread > 0.0:
        detectable = detectable_gain(n, variance=spread)
    else:
        detectable = detectable_gain(n) if binary else None
    return Gain(
        split=split,
        n=n,
        estimate=estimate,
        low=low,
        high=high,
        p_value=p_value,
        verdict=verdict,
        detectable=detectable,
        method=method,
        a_mean=float(x.mean()),
        b_mean=float(y.mean()),
        val_estimate=val_estimate,
    )


def _verdict(p_value: float, low: float, high: float) -> str:
    """The verdict: "better" when the interval lies above 0 and the test agrees (p < 0.05),
    "worse" when below, else "no difference detected"."""
    significant = p_value < 1 - LEVEL
    if significant and low > 0:
        return BETTER
    if significant and high < 0:
        return WORSE
    return NO_DIFFERENCE


def _mean(d: Any, axis: int = -1) -> Any:
    return d.mean(axis=axis)


def judge_gain(
    a: Sequence[float],
    b: Sequence[float],
    pairs: Sequence[tuple[bool, bool]],
    *,
    split: str,
    val_estimate: float | None = None,
    seed: int = 0,
) -> Gain:
    """b minus a in true accuracy, when a and b are a judge's 0/1 decisions on the same items and
    `pairs` are (judge, human) decisions on labelled items (the judge's validation record).

    A judge errs: it passes a wrong output with probability 1 - tnr and fails a right one with
    probability 1 - tpr. If those rates are the same for both candidates' outputs (the judge's
    error depends on whether an output is right, not on which prompt wrote it), the judge's
    accuracy q relates to the true one p by q = tpr * p + (1 - tnr) * (1 - p), so

        p = (q + tnr - 1) / J   and   gain = (q_b - q_a) / J,   J = tpr + tnr - 1.

    (PPI's correction, with one labelled set shared by both sides, is a constant that cancels
    in a difference: it cannot correct a gain.) The interval is the judge's paired t interval
    divided by J and widened by the delta method for J's own error (tpr and tnr measured on
    the labelled items), so it holds the judge's error as well as the split's; in simulation
    (tests/test_gain.py) it covers 95% from 26 test and 30 labelled items on, where a
    percentile bootstrap over both covered 92%. The p-value is
    McNemar's exact test on the judge's decisions: with J > 0 no true difference means no
    difference in what the judge decides, so the test is exact whatever the judge's error.

    When the labels hold no right or no wrong output, or the judge is no better than chance on
    them (J <= 0), its error cannot be corrected: the judge's own paired gain is returned and
    its method says why.

    Raises:
        ValueError: a and b differ in length or hold a score that is not 0 or 1.
    """
    import numpy as np
    from scipy import stats

    raw = paired_gain(a, b, split=split, val_estimate=val_estimate, seed=seed)
    if raw.n and not raw.method.startswith("McNemar"):
        raise ValueError("judge_gain: the judge's decisions must be 0 or 1")
    judge = np.asarray([bool(j) for j, _ in pairs])
    human = np.asarray([bool(h) for _, h in pairs])
    n_labelled = len(human)
    right, wrong = int(human.sum()), int((~human).sum())
    if raw.n == 0 or right == 0 or wrong == 0:
        why = ("no right output" if right == 0 else "no wrong output") + " among the labelled items"
        return replace(raw, method=raw.method + f"; the judge's error not corrected ({why})")
    tpr = float((judge & human).sum() / right)
    tnr = float((~judge & ~human).sum() / wrong)
    youden = tpr + tnr - 1
    if youden <= 0:
        return replace(
            raw,
            method=raw.method
            + f"; the judge's error not corrected (tpr {tpr:.2f} + tnr {tnr:.2f} - 1 <= 0: "
            "no better than chance on its labels)",
        )
    d = np.asarray(b, dtype=float) - np.asarray(a, dtype=float)
    estimate = max(-1.0, min(1.0, float(d.mean()) / youden))  # no gain is past the score range
    # The delta method: the judge's gain and J are independent (different items), so
    # var(gain / J) ~ var(gain) / J**2 + estimate**2 * var(J) / J**2, with tpr and tnr
    # binomial proportions; the quantile is Student's t on the test items, as paired_gain's.
    var_j = tpr * (1 - tpr) / right + tnr * (1 - tnr) / wrong
    var = float(d.var(ddof=1)) / raw.n / youden**2 if raw.n > 1 else 0.0
    var += estimate * estimate * var_j / youden**2
    half = float(stats.t.ppf(1 - (1 - LEVEL) / 2, max(1, raw.n - 1))) * math.sqrt(var)
    low, high = max(-1.0, estimate - half), min(1.0, estimate + half)
    assert raw.p_value is not None  # n > 0
    verdict = _verdict(raw.p_value, low, high)

    def corrected(q: float | None) -> float | None:
        return None if q is None else min(1.0, max(0.0, (q + tnr - 1) / youden))

    return replace(
        raw,
        estimate=estimate,
        low=low,
        high=high,
        verdict=verdict,
        detectable=None if raw.detectable is None else min(2.0, raw.detectable / youden),
        method=(
            f"McNemar's exact test on the judge's decisions; the gain divided by the judge's "
            f"tpr + tnr - 1 = {tpr:.2f} + {tnr:.2f} - 1 = {youden:.2f} ({n_labelled} labelled "
            "items); its t interval widened for the error in that measure (delta method)"
        ),
        a_mean=corrected(raw.a_mean),
        b_mean=corrected(raw.b_mean),
        raw_estimate=raw.estimate,
    )
