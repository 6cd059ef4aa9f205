# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""Anytime-valid rollback checks: the monitor looks every six hours, and looking must not cost honesty.

A one-sided 5 % z-test checked at 28 six-hourly looks fires on A/A data about 23 % of the time (design note
§2.6, [R59]); a confidence sequence [R40][R41] holds its error rate however often it is read. Pure functions
over sufficient statistics, broadcasting over NumPy arrays like `transforms.actions.statistics`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from transforms.actions.statistics import SEQUENTIAL_ALPHA, SEQUENTIAL_N_STAR, FloatArray, Moments, relative_change

Worse = Literal["lower", "higher"]

# The smallest window (users since the change) on which a revenue rule may breach. Per-user revenue is
# mostly zeros plus a few price points; with ~10 % payers the delta-method interval is too narrow on the
# low side at small samples (a draw with few payers has both a low mean and a low variance). The A/A harness
# (tests/transforms/actions/test_statistical_honesty.py) measured, for a rule rolling back below 0.95x its
# baseline ROAS on 100 users, 100 installs a day checked every 6 h for 14 days: 5.1 % false rollbacks with no
# floor, 0.7 % with this one (an earlier harness, 28 looks at a threshold of 0: 8.5 % and 3.9 %); below it a
# rule is "inconclusive" (§4 step 3), never a breach.
REVENUE_MIN_SAMPLE = 500


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def half_width(
    se: ArrayLike, n_total: ArrayLike, alpha: float = SEQUENTIAL_ALPHA, n_star: float = SEQUENTIAL_N_STAR
) -> FloatArray:
    """Half-width of GrowthBook's asymptotic confidence sequence around an estimate (§2.6, [R40]).

    Why this one: it is valid at every look at once (the chance that the sequence ever excludes the truth
    is at most α), needs only the estimate's standard error and the sample so far, and its tuning N* (the
    total sample at which decisions are usually made) fixes where it is tightest; keep N* fixed for an
    action's whole window. Formula: s·√(2(Nρ²+1)/(N²ρ²)·ln(√(Nρ²+1)/α)), ρ = √((−2 ln α + ln(−2 ln α + 1))/N*),
    s = se·√N (Waudby-Smith et al. 2023, eq. 9, as gbstats implements it). Zero sample: an infinite width.
    """
    if not 0.0 < alpha < 1.0 or n_star <= 0:
        raise ValueError("alpha must lie in (0, 1) and n_star must be positive")
    n = _f(n_total)
    rho2 = (-2.0 * np.log(alpha) + np.log(-2.0 * np.log(alpha) + 1.0)) / n_star
    with np.errstate(divide="ignore", invalid="ignore"):
        s = _f(se) * np.sqrt(n)
        width = s * np.sqrt(2.0 * (n * rho2 + 1.0) / (n * n * rho2) * np.log(np.sqrt(n * rho2 + 1.0) / alpha))
    return np.asarray(np.where(n > 0, width, np.inf), dtype=np.float64)


def proportion_difference(
    successes_baseline: ArrayLike, trials_baseline: ArrayLike, successes: ArrayLike, trials: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(p − p_baseline, its standard error, total trials) for a rate watched against its baseline (§2.6).

    Why unpooled: the monitor asks how far the rate moved, not whether two rates are equal, so each arm
    contributes its own binomial variance, as in the note's simulation of the rollback rule.
    """
    s0, n0, s1, n1 = _f(successes_baseline), _f(trials_baseline), _f(successes), _f(trials)
    with np.errstate(divide="ignore", invalid="ignore"):
        p0, p1 = s0 / n0, s1 / n1
        se = np.sqrt(p0 * (1.0 - p0) / n0 + p1 * (1.0 - p1) / n1)
    return np.asarray(p1 - p0, dtype=np.float64), np.asarray(se, dtype=np.float64), n0 + n1


def relative_mean_change(baseline: Moments, current: Moments) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(μ/μ_baseline − 1, its delta-method standard error, total n) for a mean watched against its baseline.

    Why relative: rollback rules are written as "roas_d7 below 0.80× baseline", i.e. a threshold of −0.20
    on this estimate; the standard error is §2.3's, which also carries the baseline's own noise.
    """
    delta, se = relative_change(baseline, current)
    return delta, se, baseline.n + current.n


@dataclass(frozen=True)
class Verdict:
    estimate: FloatArray
    bound: FloatArray  # the sequence's end nearest the threshold: upper if lower is worse, lower otherwise
    breached: NDArray[np.bool_]


def breached(
    estimate: ArrayLike,
    se: ArrayLike,
    n_total: ArrayLike,
    threshold: ArrayLike,
    worse: Worse,
    alpha: float = SEQUENTIAL_ALPHA,
    n_star: float = SEQUENTIAL_N_STAR,
    sample: ArrayLike | None = None,
    min_sample: float = 0.0,
) -> Verdict:
    """Whether the whole confidence sequence lies on the bad side of the threshold (§2.6, §4).

    Why the whole interval: a rollback undoes a change a human approved, so it needs the data to exclude
    "still acceptable" at every look, not a point estimate past the line; LaunchDarkly's guarded rollouts
    flag a regression the same way [R48]. "lower is worse" (a conversion rate, ROAS): breach when
    estimate + half-width < threshold; "higher is worse" (CPI, refund rate): estimate − half-width >
    threshold. An undefined estimate (NaN) never breaches, nor does a window whose `sample` (the units
    observed since the change) is below `min_sample` (§4: "below min_sample → inconclusive").
    """
    est = _f(estimate)
    width = half_width(se, n_total, alpha=alpha, n_star=n_star)
    limit = _f(threshold)
    if worse == "lower":
        bound = est + width
        hit = bound < limit
    elif worse == "higher":
        bound = est - width
        hit = bound > limit
    else:
        raise ValueError(f"worse must be 'lower' or 'higher', not {worse!r}")
    enough = np.ones_like(hit) if sample is None else _f(sample) >= min_sample
    return Verdict(
        estimate=est, bound=np.asarray(bound, dtype=np.float64), breached=np.asarray(hit & ~np.isnan(bound) & enough)
    )
