# The formulas are written as the design note writes them (κ, δ, −, ×, ≥); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""The engine's proposal rules as array functions: one implementation for one subject and for a thousand worlds.

Why a module of its own: each generator in `proposals` evaluates one named subject (it must: the evidence,
the guardrail details and `POST /v1/actions` are per subject), while the honesty harness
(tests/transforms/actions/test_statistical_honesty.py, issue 18) must measure the A/A proposal rate and the
power of the very rule that ships, on 1 000 seeded worlds at once. So the decision itself (thresholds,
prior, posterior probability, bar, sample floors) lives here, as pure functions broadcasting over NumPy
arrays, and the generators call them on one subject's sums (a campaign's creatives, a pair of campaigns, a
paywall cell). A threshold changed here changes what the engine proposes and what the harness measures.

What each function decides is what the engine does with it: `signal` opens an action (a `draft` when a
guardrail fails, `ready` when all pass); `sample_ok` is the statistical half of the `minimum_cohort_size`
guardrail (the floors and the power check on the claimed effect). Everything NaN decides nothing: every
comparison below is False for NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from transforms.actions import statistics as st
from transforms.actions.statistics import FloatArray

BoolArray = NDArray[np.bool_]

# --- thresholds (design note §5.2, scaled where the data demands it; see `proposals`' module docstring)
# budget shift
SHIFT_MIN_INSTALLS = 200  # each side's installs in the compared cohorts (the power check carries the weight)
SHIFT_MIN_LIFT = 0.20  # posterior mean lift the recipient must show
MAX_RISK = 0.01  # expected loss (log-ROAS units, ≈ relative) of choosing the recipient
# The horizon D of the compared ROAS and how much of the bar's allowed error it keeps (§2.3): D = 30
# decides at p_decision; D = 14 (younger data) at a stricter bar, half the allowed error.
SHIFT_BAR_FACTOR: dict[int, float] = {30: 1.0, 14: 0.5}
# creative pause
PAUSE_MIN_TRIALS = 30  # matured trials of the creative
PAUSE_MIN_REST_TRIALS = 60  # matured trials of the rest of its campaign
PAUSE_MARGIN = 0.20  # δ: the creative converts at least 20 % worse than the rest
PAUSE_MIN_SPEND_SHARE = 0.05  # of its campaign's spend: below it a pause changes nothing worth a review
PAUSE_MIN_PAID_COSTS = 2.0  # the creative spent ≥ 2 × its campaign's cost per paid conversion (§5.2)
# offer test
OFFER_MIN_PAYWALL_USERS = 100
OFFER_UP = 1.25  # the offer converts ≥ 1.25× as well here as in the other countries


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def _b(x: ArrayLike) -> BoolArray:
    return np.asarray(x, dtype=np.bool_)


# ---------------------------------------------------------------- budget shift


def shift_bar(p_decision: float, horizon_days: int) -> float:
    """The chance-to-win a shift needs at horizon D (§2.3): p_decision at D = 30, 1 − (1 − p)/2 at D = 14."""
    return 1.0 - (1.0 - p_decision) * SHIFT_BAR_FACTOR[horizon_days]


@dataclass(frozen=True)
class ShiftDecision:
    """A budget shift source → target per element: the log-lift posterior and what the engine does."""

    bar: float
    chance_to_win: FloatArray  # P(ROAS_T > ROAS_S)
    log_lift_mean: FloatArray
    log_lift_sd: FloatArray
    risk: FloatArray  # E[max(−θ, 0)]
    lift: FloatArray  # e^{mean} − 1, the posterior lift the rule reads
    needed: FloatArray  # installs per side the claimed lift needs at 80 % power (inf: no lift claimed)
    signal: BoolArray  # CTW ≥ bar, lift ≥ +20 %, risk ≤ 0.01: a proposal (when a budget can be moved)
    sample_ok: BoolArray  # both sides ≥ max(SHIFT_MIN_INSTALLS, needed)


def budget_shift(
    source_roas: ArrayLike,
    source_var: ArrayLike,
    source_installs: ArrayLike,
    target_roas: ArrayLike,
    target_var: ArrayLike,
    target_installs: ArrayLike,
    p_decision: float,
    horizon_days: int = 30,
) -> ShiftDecision:
    """Whether moving budget from source to target pays back faster (§5.2 budget_shift, on the log scale).

    `*_roas` is each side's (country-standardised) ROAS at the horizon and `*_var` the variance of that
    estimate, as `proposals` computes them; the lift is ln(ROAS_T/ROAS_S) under N(0, 0.3²)
    (`statistics.log_ratio_posterior`, why there). The power check asks for the installs that would
    detect the claimed lift at 80 % power with the source's per-install sd: a lift claimed from fewer is
    most likely a lucky draw (§5.3), so the action stays a draft.
    """
    s_mean, s_var, s_n = _f(source_roas), _f(source_var), _f(source_installs)
    t_n = _f(target_installs)
    bar = shift_bar(p_decision, horizon_days)
    post = st.log_ratio_posterior(s_mean, s_var, target_roas, target_var)
    with np.errstate(invalid="ignore", over="ignore"):
        lift = np.exp(post.mean) - 1.0
        claimed = np.maximum(lift, 0.0)
        sd_user = np.where(s_n > 0, np.sqrt(s_var * s_n), np.nan)
        powered = (claimed > 0) & (s_mean > 0)
        needed = np.where(powered, st.sample_size_mean(s_mean, sd_user, np.where(powered, claimed, 1.0)), np.inf)
    signal = (post.chance_to_win >= bar) & (lift >= SHIFT_MIN_LIFT) & (post.risk <= MAX_RISK)
    return ShiftDecision(
        bar=bar,
        chance_to_win=post.chance_to_win,
        log_lift_mean=post.mean,
        log_lift_sd=post.sd,
        risk=post.risk,
        lift=np.asarray(lift, dtype=np.float64),
        needed=np.asarray(needed, dtype=np.float64),
        signal=_b(signal),
        sample_ok=_b(np.minimum(s_n, t_n) >= np.maximum(SHIFT_MIN_INSTALLS, needed)),
    )


# ---------------------------------------------------------------- creative pause


@dataclass(frozen=True)
class PauseDecision:
    """Every creative of a campaign (the last axis) against the rest of its campaign."""

    prior_rate: FloatArray  # the campaign's empirical-Bayes prior (the last axis reduced)
    prior_kappa: FloatArray
    p_worse: FloatArray  # P(p_C < (1 − δ)·p_rest); 0 when either side has no trials
    claimed_gap: FloatArray  # max(observed relative gap, δ): the gap the power check asks about
    needed: FloatArray  # matured trials per side that gap needs at 80 % power (inf: no base rate)
    spend_share: FloatArray  # of the campaign's spend
    signal: BoolArray  # P(worse) ≥ p_decision, spend share ≥ 5 %, another ad stays active
    sample_ok: BoolArray  # floors, power check and spend floor: the `minimum_cohort_size` guardrail


def creative_pause(
    conversions: ArrayLike,
    trials: ArrayLike,
    spend: ArrayLike,
    p_decision: float,
    *,
    others_active: ArrayLike = True,
    margin: float = PAUSE_MARGIN,
) -> PauseDecision:
    """Which creatives of a campaign convert matured trials to paid clearly worse than the rest (§5.2).

    Arrays hold a campaign's creatives on the last axis (matured trial conversions, matured trials,
    spend); leading axes are independent campaigns. The prior is fitted on the campaign's own creatives
    (`statistics.fit_beta_priors`), so a creative is paused for a gap its siblings do not show, and the
    signal needs P(p_C < (1 − δ)·p_rest) ≥ p_decision: a gap that matters, not any gap (§2.2).
    `others_active`: whether another ad of the campaign stays active (the registry knows; never pause
    the last). `margin` is δ; only the harness passes another, to show what the margin is for.
    """
    s, n, cost = np.broadcast_arrays(_f(conversions), _f(trials), _f(spend))
    rate, kappa = st.fit_beta_priors(s, n)
    s_rest = s.sum(axis=-1, keepdims=True) - s
    n_rest = n.sum(axis=-1, keepdims=True) - n
    both = (n > 0) & (n_rest > 0)
    # A campaign without trials has no prior: give it any valid one, its creatives decide nothing.
    valid = np.isfinite(rate)
    prior_rate = np.where(valid, rate, 0.5)[..., None]
    prior_kappa = np.where(valid, kappa, st.PRIOR_STRENGTH)[..., None]
    post_c = st.beta_posterior(s, n, prior_rate, prior_kappa)
    post_r = st.beta_posterior(s_rest, n_rest, prior_rate, prior_kappa)
    p_worse = np.where(both & valid[..., None], st.prob_worse_by(post_c, post_r, margin), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_c, rate_r = s / n, s_rest / n_rest
        gap = np.where(both & (rate_r > 0), 1.0 - rate_c / rate_r, 0.0)
        claimed = np.maximum(gap, margin)
        based = (rate_r > 0) & (rate_r < 1)
        needed = np.where(based, st.sample_size_proportion(np.where(based, rate_r, 0.5), -claimed), np.inf)
        spend_all = cost.sum(axis=-1, keepdims=True)
        share = np.where(spend_all > 0, cost / spend_all, 0.0)
        wins = s.sum(axis=-1, keepdims=True)
        cost_per_paid = np.where(wins > 0, spend_all / wins, np.inf)
    size_ok = (n >= np.maximum(PAUSE_MIN_TRIALS, needed)) & (n_rest >= np.maximum(PAUSE_MIN_REST_TRIALS, needed))
    spend_ok = (cost >= PAUSE_MIN_PAID_COSTS * cost_per_paid) & (share >= PAUSE_MIN_SPEND_SHARE)
    signal = (p_worse >= p_decision) & (share >= PAUSE_MIN_SPEND_SHARE) & _b(others_active)
    return PauseDecision(
        prior_rate=np.asarray(rate, dtype=np.float64),
        prior_kappa=np.asarray(kappa, dtype=np.float64),
        p_worse=np.asarray(p_worse, dtype=np.float64),
        claimed_gap=np.asarray(claimed, dtype=np.float64),
        needed=np.asarray(needed, dtype=np.float64),
        spend_share=np.asarray(share, dtype=np.float64),
        signal=_b(signal),
        sample_ok=_b(size_ok & spend_ok),
    )


# ---------------------------------------------------------------- offer test


@dataclass(frozen=True)
class OfferDecision:
    """An offer in one country against the same offer in the other countries."""

    p_up: FloatArray  # P(rate_elsewhere < rate_here / 1.25)
    needed: FloatArray  # paywall users a +25 % gap at the elsewhere rate needs at 80 % power
    signal: BoolArray  # P ≥ p_decision and ≥ OFFER_MIN_PAYWALL_USERS here
    sample_ok: BoolArray  # users here ≥ max(OFFER_MIN_PAYWALL_USERS, needed)


def offer_test(
    paid_here: ArrayLike, users_here: ArrayLike, paid_else: ArrayLike, users_else: ArrayLike, p_decision: float
) -> OfferDecision:
    """Whether a country answers an offer clearly better than the others (§5.2 offer_test, price up).

    Beta posteriors on paid / paywall users, both centred on the pooled rate with the default weak prior:
    P(rate_else < (1 − δ)·rate_here) with 1 − δ = 1/1.25, i.e. the country converts at ≥ 1.25× the others.
    """
    s_h, n_h, s_e, n_e = _f(paid_here), _f(users_here), _f(paid_else), _f(users_else)
    with np.errstate(divide="ignore", invalid="ignore"):
        base = np.clip((s_h + s_e) / (n_h + n_e), 1e-3, 1 - 1e-3)
        rate_else = s_e / n_e
    base = np.where(np.isfinite(base), base, 0.5)
    p_up = st.prob_worse_by(st.beta_posterior(s_e, n_e, base), st.beta_posterior(s_h, n_h, base), 1.0 - 1.0 / OFFER_UP)
    based = (rate_else > 0) & (rate_else < 1)
    needed = np.where(based, st.sample_size_proportion(np.where(based, rate_else, 0.5), OFFER_UP - 1.0), np.inf)
    return OfferDecision(
        p_up=np.asarray(p_up, dtype=np.float64),
        needed=np.asarray(needed, dtype=np.float64),
        signal=_b((p_up >= p_decision) & (n_h >= OFFER_MIN_PAYWALL_USERS)),
        sample_ok=_b(n_h >= np.maximum(OFFER_MIN_PAYWALL_USERS, needed)),
    )
