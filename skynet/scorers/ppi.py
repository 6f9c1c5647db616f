"""Prediction-powered inference (PPI, PPI++) for an accuracy measured by a judge.

A judge's decisions on many unlabelled outputs give a precise but possibly biased accuracy; a
person's labels on a few outputs give an unbiased but imprecise one. PPI (Angelopoulos et al.,
2023) combines them: the judge's mean on the unlabelled outputs, corrected by the judge's error
measured on the labelled ones.

    estimate = lam * mean(judge_u) + mean(human_l - lam * judge_l)
    se       = sqrt(var(lam * judge_u) / N + var(human_l - lam * judge_l) / n)
    interval = estimate -/+ z_(1 - alpha/2) * se             (then clipped to [0, 1])

`lam` = 1 is plain PPI, `lam` = 0 the classical mean of the human labels; with `lam` None it is
tuned (PPI++, Angelopoulos, Duchi and Zrnic 2023) to the value that minimises the variance:

    lam = cov(human_l, judge_l) / ((1 + n / N) * var(judge_l ++ judge_u)),  clipped to [0, 1]

These are the figures ppi_py's `ppi_mean_pointestimate` and `ppi_mean_ci` compute (variances
with 1/n, except the pooled judge variance with 1/(n+N-1), as there); the test suite checks them
against that package. The assumption: the labelled items are drawn i.i.d. from the same
population as the unlabelled ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from skynet.errors import ConfigError

__all__ = ["PPIEstimate", "judge_ppi"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PPIEstimate:
    """A prediction-powered accuracy and its interval.

    Attributes:
        estimate: the point estimate (not clipped: it is unbiased as it is).
        low, high: the (1 - alpha) normal-approximation interval, clipped to [0, 1].
        lam: the power-tuning parameter used (0: human labels only; 1: plain PPI).
        alpha: the error level of the interval.
        n: labelled items; N: unlabelled items.
        judge_raw: the judge's own accuracy on the unlabelled items (its mean decision).
        notes: what was decided for a degenerate input (e.g. a judge that never varies).
    """

    estimate: float
    low: float
    high: float
    lam: float
    alpha: float
    n: int
    N: int
    judge_raw: float
    notes: tuple[str, ...] = ()


def _as_decisions(values: Sequence[Any], what: str) -> np.ndarray:
    out = []
    for index, value in enumerate(values):
        if (
            isinstance(value, (bool, np.bool_))
            or isinstance(value, (int, float, np.integer, np.floating))
            and float(value) in (0, 1)
        ):
            out.append(float(value))
        else:
            raise ConfigError(
                f"judge_ppi: {what}[{index}] is {value!r}; each decision is a bool (or 0/1)"
            )
    return np.asarray(out, dtype=float)


def judge_ppi(
    judge_on_unlabelled: Sequence[Any],
    judge_on_labelled: Sequence[Any],
    human_labels: Sequence[Any],
    alpha: float = 0.05,
    lam: float | None = None,
) -> PPIEstimate:
    """The prediction-powered estimate of accuracy, with its (1 - alpha) interval.

    Args:
        judge_on_unlabelled: the judge's decisions (right = True) on outputs no person labelled.
        judge_on_labelled: the judge's decisions on the outputs a person labelled.
        human_labels: the person's labels on those same outputs, in the same order.
        alpha: the interval's error level, in (0, 1).
        lam: the power-tuning parameter in [0, 1]; None tunes it (PPI++).

    Raises:
        ConfigError: fewer than 2 labelled or no unlabelled decisions, lengths that differ, a
            decision that is not a bool, alpha outside (0, 1) or lam outside [0, 1].
    """
    yhat_u = _as_decisions(judge_on_unlabelled, "judge_on_unlabelled")
    yhat = _as_decisions(judge_on_labelled, "judge_on_labelled")
    y = _as_decisions(human_labels, "human_labels")
    if len(yhat) != len(y):
        raise ConfigError(
            f"judge_ppi: {len(yhat)} judge decisions on the labelled items but {len(y)} human "
            "labels; give one judge decision per labelled item, in the same order"
        )
    n, big_n = len(y), len(yhat_u)
    if n < 2:
        raise ConfigError(
            f"judge_ppi: {n} labelled item(s); PPI needs at least 2 (label more outputs with "
            "`skynet judge collect`)"
        )
    if big_n < 1:
        raise ConfigError("judge_ppi: no unlabelled decisions; score some outputs with the judge")
    if not 0 < alpha < 1:
        raise ConfigError(f"judge_ppi: alpha = {alpha!r}; give a level in (0, 1), e.g. 0.05")
    if lam is not None and not (isinstance(lam, (int, float)) and 0 <= lam <= 1):
        raise ConfigError(f"judge_ppi: lam = {lam!r}; give a number in [0, 1], or None to tune it")

    notes: list[str] = []
    if lam is None:
        pooled = np.concatenate([yhat, yhat_u])
        pooled_var = float(pooled.var(ddof=1))
        if pooled_var == 0.0:
            # A judge that never varies carries no information beyond its constant; every lam
            # gives the same estimate and interval, so take the classical one and say so.
            lam = 0.0
            notes.append(
                "the judge gave the same decision on every item (zero variance): lam set to 0, "
                "the human labels' own mean and interval"
            )
        else:
            cov = float(((y - y.mean()) * (yhat - yhat.mean())).mean())
            tuned = cov / ((1 + n / big_n) * pooled_var)
            lam = float(min(1.0, max(0.0, tuned)))
    lam = float(lam)
    estimate = float(lam * yhat_u.mean() + (y - lam * yhat).mean())
    se = math.sqrt(float((lam * yhat_u).var()) / big_n + float((y - lam * yhat).var()) / n)
    half = float(norm.ppf(1 - alpha / 2)) * se
    if se == 0.0:
        notes.append("the interval has zero width: the labels and decisions do not vary")
    return PPIEstimate(
        estimate=estimate,
        low=max(0.0, estimate - half),
        high=min(1.0, estimate + half),
        lam=lam,
        alpha=alpha,
        n=n,
        N=big_n,
        judge_raw=float(yhat_u.mean()),
        notes=tuple(notes),
    )
