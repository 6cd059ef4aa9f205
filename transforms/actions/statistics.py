# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""The statistics the actions engine proposes with and the monitor rolls back with.

Everything is a pure, deterministic function over sufficient statistics (counts; per-arm `n`, `S1 = Σx`,
`S2 = Σx²`), the shape Polars aggregates produce, so a proposal can be recomputed bit for bit from the
evidence it stores. Functions take NumPy arrays (or scalars) and broadcast: the engine scores every
candidate of a refresh in one call. Undefined inputs (n < 2 for a variance, a zero control mean) give NaN,
and every decision in the engine is a `>=` / `<` comparison, which is False for NaN: no data, no action.

The formulas and their sources are in the design note, /work/shared/design/actions-engine.md (§2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy.special only: scipy.stats costs 0.85 s more to import, paid by every Dagster code server
# and run worker (they load this through the definitions); the three functions this module took
# from it are the special functions it calls itself (`_norm_pdf`, `special.ndtri`, `special.chdtrc`).
from scipy import special  # type: ignore[import-untyped]  # scipy ships no stubs (scipy-stubs is not a dependency)

FloatArray = NDArray[np.float64]
_SQRT_2PI = np.sqrt(2 * np.pi)


def _norm_pdf(z: FloatArray) -> FloatArray:
    """The standard normal density (what `scipy.stats.norm.pdf` computes, to the bit)."""
    return np.asarray(np.exp(-(z**2) / 2.0) / _SQRT_2PI, dtype=np.float64)


# §2.2: a weak prior worth 20 trials, centred on a reference rate (the campaign's, the workspace's).
PRIOR_STRENGTH = 20.0
# §2.3: GrowthBook's default proper prior on a relative lift, N(0, 0.3²): 68 % of effects within ±30 %.
LIFT_PRIOR_SD = 0.3
# §2.5: the MDE table's conventions (two-sided 5 %, 80 % power) and the SRM alarm level.
MDE_ALPHA = 0.05
MDE_POWER = 0.80
SRM_P_VALUE = 0.001
# §2.6: the monitor's confidence sequence: two-sided α = 0.10 (one side of it is a 5 % rule) and
# GrowthBook's default N*, the total sample at which the sequence is tightest. A caller that knows the
# observation window's expected sample (30 trials × 2 arms × 28 looks = 1,680 in §2.6) passes it.
SEQUENTIAL_ALPHA = 0.10
SEQUENTIAL_N_STAR = 5000.0
# §2.4: the false discovery rate for screening many candidates by p-values.
FDR_Q = 0.10
# The empirical-Bayes strength is clipped: below 2 the prior is weaker than one success and one failure
# (the fit is noise); above 1,000 it would outweigh any creative's data, so nothing could ever be paused.
EB_KAPPA_MIN = 2.0
EB_KAPPA_MAX = 1000.0


def _f(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------- conversion metrics (§2.2)


@dataclass(frozen=True)
class BetaPosterior:
    """Beta(α, β) per candidate; arrays broadcast together."""

    alpha: FloatArray
    beta: FloatArray

    @property
    def mean(self) -> FloatArray:
        return self.alpha / (self.alpha + self.beta)

    @property
    def variance(self) -> FloatArray:
        total = self.alpha + self.beta
        return self.alpha * self.beta / (total * total * (total + 1.0))


def beta_posterior(
    successes: ArrayLike, trials: ArrayLike, prior_rate: ArrayLike, kappa: ArrayLike = PRIOR_STRENGTH
) -> BetaPosterior:
    """Posterior of a rate under a Beta prior worth `kappa` trials centred on `prior_rate` (§2.2).

    Why this prior: a creative with 4/10 trials converting is not better than one with 300/1000; centring a
    weak prior on the reference rate shrinks small groups toward it instead of acting on their noise, and
    with κ = 20 a few hundred trials outweigh it. An integral κ·p̄ keeps α integral, which is what the
    closed form of `prob_greater` needs.
    """
    s, n, p, k = _f(successes), _f(trials), _f(prior_rate), _f(kappa)
    if np.any((p <= 0.0) | (p >= 1.0)) or np.any(k <= 0.0):
        raise ValueError("the prior rate must lie strictly between 0 and 1 and kappa must be positive")
    if np.any((s < 0) | (s > n)):
        raise ValueError("successes must lie between 0 and the number of trials")
    return BetaPosterior(alpha=k * p + s, beta=k * (1.0 - p) + n - s)


@dataclass(frozen=True)
class EmpiricalBayesPrior:
    rate: float
    kappa: float


def fit_beta_prior(successes: ArrayLike, trials: ArrayLike) -> EmpiricalBayesPrior:
    """Method-of-moments fit of the rate and strength of a Beta prior across groups (§2.2, [R45]).

    Why: the campaign's own creatives say how much creatives really differ. Under a beta-binomial the
    n-weighted spread of the group rates exceeds the binomial spread by the intra-class correlation
    ρ = 1/(κ+1): E[Σ nᵢ(rᵢ − p̄)²] = p̄(1−p̄)·[(K−1) + ρ·(N − Σnᵢ²/N)], solved for ρ. Groups that look alike
    (ρ ≤ 0) get the strongest prior allowed, so a creative is paused only on a gap the others do not show;
    the clip keeps the prior from either vanishing or outweighing any data. With fewer than two groups
    holding trials there is no spread to measure, and the default κ = 20 applies. One set of groups;
    `fit_beta_priors` is the same fit for many sets at once.
    """
    s, n = _f(successes).ravel(), _f(trials).ravel()
    keep = n > 0
    if float(n[keep].sum()) <= 0:
        raise ValueError("no trials to fit a prior on")
    rate, kappa = fit_beta_priors(s[keep], n[keep])
    return EmpiricalBayesPrior(rate=float(rate), kappa=float(kappa))


def fit_beta_priors(successes: ArrayLike, trials: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(rate, κ) of `fit_beta_prior` for every set of groups on the last axis at once.

    Why vectorised: the engine fits one campaign's creatives per evaluation, the honesty harness a
    thousand simulated campaigns per test; both read this one fit. Groups without trials are left out;
    a set with no trials at all has no prior (NaN, NaN), which no decision acts on.
    """
    s, n = np.broadcast_arrays(_f(successes), _f(trials))
    keep = n > 0
    s, n = np.where(keep, s, 0.0), np.where(keep, n, 0.0)
    total = n.sum(axis=-1)
    groups = keep.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # A pooled rate of exactly 0 or 1 is no valid Beta centre: pull it half a trial inside.
        rate = np.minimum(np.maximum(s.sum(axis=-1) / total, 0.5 / total), 1.0 - 0.5 / total)
        denominator = total - (n * n).sum(axis=-1) / total
        group_rate = np.where(keep, s / np.where(keep, n, 1.0), 0.0)
        spread = (n * (group_rate - rate[..., None]) ** 2).sum(axis=-1) / (rate * (1.0 - rate))
        rho = (spread - (groups - 1)) / denominator
        fitted = np.clip(np.where(rho <= 0, EB_KAPPA_MAX, 1.0 / rho - 1.0), EB_KAPPA_MIN, EB_KAPPA_MAX)
    kappa = np.where((groups < 2) | ~(denominator > 0), PRIOR_STRENGTH, fitted)
    none = ~(total > 0)
    return (
        np.asarray(np.where(none, np.nan, rate), dtype=np.float64),
        np.asarray(np.where(none, np.nan, kappa), dtype=np.float64),
    )


def _prob_greater_exact(a_a: float, b_a: float, a_b: float, b_b: float) -> float:
    # Evan Miller's sum, valid for an integral α_B [R37]; summed in log space so that thousands of
    # tiny terms neither underflow nor lose precision.
    i = np.arange(round(a_b), dtype=np.float64)
    terms = (
        special.betaln(a_a + i, b_a + b_b) - np.log(b_b + i) - special.betaln(1.0 + i, b_b) - special.betaln(a_a, b_a)
    )
    return float(np.clip(np.exp(special.logsumexp(terms)), 0.0, 1.0))


def prob_greater(a: BetaPosterior, b: BetaPosterior) -> FloatArray:
    """P(p_B > p_A) for two Beta posteriors (§2.2).

    Why: Evan Miller's closed form [R37] is exact and deterministic (no Monte Carlo seed to store) when
    α_B is an integer; when only α_A is, the same sum gives P(p_A > p_B) and ties have probability zero.
    When neither is integral (an empirical-Bayes prior), the note's normal approximation would be off by
    more than half a point at a few dozen trials, so the same one-dimensional quadrature as
    `prob_worse_by` (margin 0) is used instead: still deterministic, accurate to ~1e-5.
    """
    aa, ba, ab, bb = np.broadcast_arrays(a.alpha, a.beta, b.alpha, b.beta)
    out = np.asarray(prob_worse_by(BetaPosterior(aa, ba), BetaPosterior(ab, bb), 0.0), dtype=np.float64).copy()
    for idx in np.ndindex(aa.shape):
        x_a, y_a, x_b, y_b = float(aa[idx]), float(ba[idx]), float(ab[idx]), float(bb[idx])
        if abs(x_b - round(x_b)) < 1e-9 and x_b >= 1:
            out[idx] = _prob_greater_exact(x_a, y_a, x_b, y_b)
        elif abs(x_a - round(x_a)) < 1e-9 and x_a >= 1:
            out[idx] = 1.0 - _prob_greater_exact(x_b, y_b, x_a, y_a)
    return out


# Gauss-Legendre nodes on (0, 1) for integrating over the reference posterior's quantiles.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(64)
_GL_U = (_GL_NODES + 1.0) / 2.0
_GL_W = _GL_WEIGHTS / 2.0


def prob_worse_by(
    candidate: BetaPosterior,
    rest: BetaPosterior,
    margin: ArrayLike,
    method: Literal["quadrature", "normal"] = "quadrature",
) -> FloatArray:
    """P(p_C < (1 − δ)·p_rest): how sure we are a creative converts at least δ worse than its campaign (§2.2).

    Why a margin: pausing costs reach, so a creative is paused for a gap that matters (δ = 0.2 in §5.2),
    not for any gap; Evan Miller's closed form covers only δ = 0. Default method: the exact one-dimensional
    integral E_rest[I_{(1−δ)·p_rest}(α_C, β_C)], taken over the rest's posterior quantiles with 64-point
    Gauss-Legendre (deterministic, and accurate to ~1e-5 on posteriors of a few trials upward). `normal`
    is the note's cheaper approximation of the two posteriors; it is off by about a percentage point in
    the tails at ~100 trials, which is why it is not the default.
    """
    factor = 1.0 - _f(margin)
    if method == "normal":
        mean = candidate.mean - factor * rest.mean
        sd = np.sqrt(candidate.variance + factor * factor * rest.variance)
        return np.asarray(special.ndtr(-mean / sd), dtype=np.float64)
    a_c, b_c, a_r, b_r, f = np.broadcast_arrays(candidate.alpha, candidate.beta, rest.alpha, rest.beta, factor)
    quantiles = special.betaincinv(a_r[..., None], b_r[..., None], _GL_U)
    inner = special.betainc(a_c[..., None], b_c[..., None], np.clip(f[..., None] * quantiles, 0.0, 1.0))
    return np.asarray(np.clip((inner * _GL_W).sum(axis=-1), 0.0, 1.0), dtype=np.float64)


# ---------------------------------------------------------------- revenue metrics (§2.3)


@dataclass(frozen=True)
class Moments:
    """Per-arm sufficient statistics of a per-user metric: count, Σx, Σx²."""

    n: FloatArray
    s1: FloatArray
    s2: FloatArray

    @classmethod
    def of(cls, n: ArrayLike, s1: ArrayLike, s2: ArrayLike) -> Moments:
        return cls(_f(n), _f(s1), _f(s2))

    @property
    def mean(self) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.n > 0, self.s1 / self.n, np.nan)

    @property
    def variance(self) -> FloatArray:
        # The sample variance; n < 2 has none (NaN). Clipped at 0: S2 − S1²/n can round below zero.
        with np.errstate(divide="ignore", invalid="ignore"):
            raw = (self.s2 - self.s1 * self.s1 / self.n) / (self.n - 1.0)
        return np.where(self.n >= 2, np.maximum(raw, 0.0), np.nan)


def relative_change(control: Moments, treatment: Moments) -> tuple[FloatArray, FloatArray]:
    """(Δr, σΔr): the relative difference of means and its delta-method standard error (§2.3).

    Why the delta method: ROAS and ARPU are means of per-user contributions, and the decision is about
    a relative lift; GrowthBook's estimator [R39][R44] needs only (n, S1, S2) per arm and accounts for the
    control mean's own noise in the denominator. NaN when the control mean is not positive.
    """
    mu_c, mu_t = control.mean, treatment.mean
    var_c, var_t = control.variance, treatment.variance
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = mu_c > 0
        delta = np.where(ok, (mu_t - mu_c) / mu_c, np.nan)
        var = var_c * mu_t**2 / (mu_c**4 * control.n) + var_t / (mu_c**2 * treatment.n)
        se = np.where(ok, np.sqrt(var), np.nan)
    return np.asarray(delta, dtype=np.float64), np.asarray(se, dtype=np.float64)


@dataclass(frozen=True)
class LiftPosterior:
    raw: FloatArray  # Δr, the observed relative lift
    raw_se: FloatArray  # σΔr
    mean: FloatArray  # posterior mean of the lift
    sd: FloatArray  # posterior sd
    chance_to_win: FloatArray  # P(lift > 0)
    risk: FloatArray  # expected relative loss of choosing the treatment, E[max(−lift, 0)]


def lift_posterior(control: Moments, treatment: Moments, prior_sd: float = LIFT_PRIOR_SD) -> LiftPosterior:
    """The relative lift of treatment over control under GrowthBook's N(0, prior_sd²) prior (§2.3).

    Why a proper prior: with a few hundred installs per campaign a raw +47 % is mostly luck; N(0, 0.3²)
    says most real effects are within ±30 % and shrinks the estimate accordingly (the note's example: +47 %
    raw becomes +35 % ± 15 %). Chance to win is the posterior mass above 0, and the risk is Stucchio's
    expected loss [R38], so a decision can also require "little to lose if wrong". With zero variance in
    both arms the data are a point mass and the prior no longer matters.
    """
    raw, se = relative_change(control, treatment)
    prior_var = prior_sd * prior_sd
    data_var = se * se
    with np.errstate(divide="ignore", invalid="ignore"):
        post_var = np.where(data_var > 0, 1.0 / (1.0 / prior_var + 1.0 / data_var), 0.0)
        post_mean = np.where(data_var > 0, post_var * raw / data_var, raw)
        sd = np.sqrt(post_var)
        z = post_mean / sd
        ctw = np.where(sd > 0, special.ndtr(z), np.where(post_mean > 0, 1.0, np.where(post_mean < 0, 0.0, 0.5)))
        risk = np.where(sd > 0, sd * _norm_pdf(z) - post_mean * special.ndtr(-z), np.maximum(-post_mean, 0.0))
    nan = np.isnan(raw) | np.isnan(se)
    return LiftPosterior(
        raw=raw,
        raw_se=se,
        mean=np.where(nan, np.nan, post_mean),
        sd=np.where(nan, np.nan, sd),
        chance_to_win=np.where(nan, np.nan, ctw),
        risk=np.where(nan, np.nan, risk),
    )


# ---------------------------------------------------------------- power and SRM (§2.5)


def _z_total(alpha: float, power: float) -> float:
    return float(special.ndtri(1.0 - alpha / 2.0) + special.ndtri(power))


def mde_proportion(
    rate: ArrayLike, n_per_arm: ArrayLike, alpha: float = MDE_ALPHA, power: float = MDE_POWER
) -> FloatArray:
    """The relative minimum detectable effect on a rate with n per arm (§2.5, [R41]).

    Why: a guardrail must ask whether the sample could have detected the effect being claimed; a gap
    claimed from a sample whose MDE is larger is most likely a lucky draw. MDE = σΔ·(z_{1−α/2} + z_power)
    with σΔ = √(2p(1−p)/n) at the baseline rate, divided by p (the note's table: p = 0.35, n = 100 → 54 %).
    """
    p, n = _f(rate), _f(n_per_arm)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero rate or sample has no MDE (inf/NaN)
        return np.asarray(_z_total(alpha, power) * np.sqrt(2.0 * p * (1.0 - p) / n) / p, dtype=np.float64)


def sample_size_proportion(
    rate: ArrayLike, relative_effect: ArrayLike, alpha: float = MDE_ALPHA, power: float = MDE_POWER
) -> FloatArray:
    """Trials per arm to detect a relative change of a rate, rounded up (§2.5, [R41]).

    Why: `minimum_cohort_size` is computed from the effect being claimed rather than fixed at 500:
    n = (z_{1−α/2} + z_power)²·[p(1−p) + p'(1−p')]/(p − p')², p' = p·(1 + effect). The note's example: a
    40 % gap at a 35 % base rate needs 158.
    """
    p, e = _f(rate), _f(relative_effect)
    q = p * (1.0 + e)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = _z_total(alpha, power) ** 2 * (p * (1.0 - p) + q * (1.0 - q)) / (p - q) ** 2
    return np.asarray(np.ceil(n), dtype=np.float64)


def mde_mean(
    mean: ArrayLike, sd: ArrayLike, n_per_arm: ArrayLike, alpha: float = MDE_ALPHA, power: float = MDE_POWER
) -> FloatArray:
    """The relative MDE on a mean (ROAS, ARPU) with n per arm and the control's sd in both arms (§2.5).

    Why the same shape as for rates: σΔ = √(2σ²/n), so proportion and revenue guardrails read alike.
    """
    m, s, n = _f(mean), _f(sd), _f(n_per_arm)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero mean or sample has no MDE (inf/NaN)
        return np.asarray(_z_total(alpha, power) * s * np.sqrt(2.0 / n) / m, dtype=np.float64)


def sample_size_mean(
    mean: ArrayLike, sd: ArrayLike, relative_effect: ArrayLike, alpha: float = MDE_ALPHA, power: float = MDE_POWER
) -> FloatArray:
    """Users per arm to detect a relative change of a mean, rounded up: 2σ²(z_{1−α/2} + z_power)²/(effect·μ)²."""
    m, s, e = _f(mean), _f(sd), _f(relative_effect)
    with np.errstate(divide="ignore"):
        n = 2.0 * s * s * _z_total(alpha, power) ** 2 / (e * m) ** 2
    return np.asarray(np.ceil(n), dtype=np.float64)


def srm_p_value(observed: ArrayLike, weights: ArrayLike) -> FloatArray:
    """The χ² goodness-of-fit p-value of arm counts against the configured split (§2.5, [R42]).

    Why: a randomised offer test whose arms are not the sizes the split promised has a broken assignment,
    and its result cannot be trusted whatever it says. Counts are on the last axis; df = K − 1. An
    experiment with no exposures yet has p = 1 (nothing is wrong yet); an arm with weight 0 that received
    exposures has p = 0 (traffic went where the split sends none). Flag with `srm_flag` at p < 0.001: at
    0.05 about half of SRM alarms would be false [R42].
    """
    o = _f(observed)
    w = _f(weights)
    w = w / w.sum(axis=-1, keepdims=True)
    total = o.sum(axis=-1, keepdims=True)
    expected = total * w
    with np.errstate(divide="ignore", invalid="ignore"):
        cells = np.where(expected > 0, (o - expected) ** 2 / expected, np.where(o > 0, np.inf, 0.0))
        chi2 = cells.sum(axis=-1)
    p = special.chdtrc(o.shape[-1] - 1, chi2)  # the chi-square survival function
    return np.asarray(np.where(total[..., 0] > 0, p, 1.0), dtype=np.float64)


def srm_flag(observed: ArrayLike, weights: ArrayLike, threshold: float = SRM_P_VALUE) -> NDArray[np.bool_]:
    return np.asarray(srm_p_value(observed, weights) < threshold)


# ---------------------------------------------------------------- multiple candidates (§2.4)


def benjamini_hochberg(p_values: ArrayLike, q: float = FDR_Q) -> NDArray[np.bool_]:
    """Which of many p-values are discoveries at false discovery rate q (§2.4, [R47]).

    Why: screening dozens of creatives at 5 % each pauses a few good ones by chance every refresh; the
    step-up rule keeps the expected share of false pauses among the pauses at q. Rejects the k smallest
    p-values, k = max{i : p_(i) ≤ q·i/m}; NaN p-values are never rejected and do not count in m.
    """
    p = _f(p_values)
    flat = p.ravel()
    valid = ~np.isnan(flat)
    m = int(valid.sum())
    reject = np.zeros(flat.shape, dtype=bool)
    if m == 0:
        return reject.reshape(p.shape)
    idx = np.flatnonzero(valid)
    order = idx[np.argsort(flat[idx], kind="stable")]
    below = flat[order] <= q * np.arange(1, m + 1) / m
    if below.any():
        k = int(np.flatnonzero(below)[-1]) + 1
        reject[order[:k]] = True
    return reject.reshape(p.shape)


# ---------------------------------------------------------------- large ratios (budget shifts)


def log_ratio_posterior(
    control_mean: ArrayLike,
    control_var: ArrayLike,
    treatment_mean: ArrayLike,
    treatment_var: ArrayLike,
    prior_sd: float = LIFT_PRIOR_SD,
) -> LiftPosterior:
    """The lift of treatment over control on the log scale, θ = ln(μT/μC), under a N(0, prior_sd²) prior.

    `*_var` is the variance of each estimated mean (not of a user's value), so standardised means (a
    weighted sum over countries) enter as they are. Why not `lift_posterior`: between campaigns the gap is
    often several-fold (the demo's fastest campaign returns 5x the slowest's ROAS), and on the relative
    scale the delta-method error grows with the ratio (σ²C·μT²/μC⁴), so the N(0, 0.3²) prior on a
    relative lift reads a 5x gap measured on 300 installs as a coin flip. On the log scale the error is
    σ²C/(nC·μC²) + σ²T/(nT·μT²) whatever the ratio, the prior N(0, 0.3²) means the same "most effects within
    about ±30 %", and the test is symmetric (A/B and B/A give the same confidence). `mean`/`sd` are of θ;
    `raw` is the observed relative lift μT/μC − 1; `chance_to_win` is P(θ > 0) and `risk` E[max(−θ, 0)].
    NaN when either mean is not positive.
    """
    mc, vc, mt, vt = _f(control_mean), _f(control_var), _f(treatment_mean), _f(treatment_var)
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = (mc > 0) & (mt > 0)
        theta = np.where(ok, np.log(np.where(ok, mt / mc, 1.0)), np.nan)
        data_var = np.where(ok, vc / (mc * mc) + vt / (mt * mt), np.nan)
        prior_var = prior_sd * prior_sd
        post_var = np.where(data_var > 0, 1.0 / (1.0 / prior_var + 1.0 / data_var), 0.0)
        post_mean = np.where(data_var > 0, post_var * theta / data_var, theta)
        sd = np.sqrt(post_var)
        z = post_mean / sd
        ctw = np.where(sd > 0, special.ndtr(z), np.where(post_mean > 0, 1.0, np.where(post_mean < 0, 0.0, 0.5)))
        risk = np.where(sd > 0, sd * _norm_pdf(z) - post_mean * special.ndtr(-z), np.maximum(-post_mean, 0.0))
        raw = np.where(ok, mt / mc - 1.0, np.nan)
    nan = np.isnan(theta) | np.isnan(data_var)
    return LiftPosterior(
        raw=np.asarray(raw, dtype=np.float64),
        raw_se=np.asarray(np.sqrt(data_var), dtype=np.float64),
        mean=np.where(nan, np.nan, post_mean),
        sd=np.where(nan, np.nan, sd),
        chance_to_win=np.where(nan, np.nan, ctw),
        risk=np.where(nan, np.nan, risk),
    )
