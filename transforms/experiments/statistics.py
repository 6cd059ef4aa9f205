# The formulas are written as the design note writes them (α, β, κ, χ², −, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""The figures of an experiment's results for its primary metric, and its sample-ratio check.

Per variant (the first is the control): `chance_to_beat_control` (one-sided P(variant > control)),
`chance_to_be_best` (P(variant is the best of all)), `lift_vs_control` (posterior mean and 95 %
credible interval of variant/control − 1) and `expected_loss` (E[max_j m_j − m_variant]: what is
given up, in the metric's own unit, by shipping this variant if another is in fact better). All are
fractions, never percents. The models (docs/metrics.md, "Experiment results"):

- rates (`trial_start_rate`, `paid_conversion_rate`): Beta(1, 1) prior, Beta(1 + s, 1 + n − s)
  posterior. With two cells the chance to beat control and the expected loss are closed forms
  (Evan Miller's sum, Stucchio's loss: deterministic, no seed), reused from the actions engine.
- revenue per user: a Bayesian bootstrap over the revenue levels users reached (Rubin 1981): the
  shares of users at each level are Dirichlet(count_k + κ·pooled_share_k) and ARPU = Σ share_k·v_k.
  Why: a paywall's revenue per user is a handful of price points and 0, which no log-normal or
  normal model fits; κ = 100 pseudo-users spread over the pooled levels keep an arm with no payer
  from being a point mass at 0 and a few large purchases from reading as a difference.

Everything Monte Carlo is seeded from (experiment id, data as-of), so a refresh over the same data
gives the same figures bit for bit, and a refresh over new data draws afresh. Imports numpy and
scipy.special only (see the note at the top of transforms/actions/statistics.py on scipy.stats).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import special  # type: ignore[import-untyped]  # scipy ships no stubs

from transforms.actions.statistics import BetaPosterior, prob_greater

FloatArray = NDArray[np.float64]

# 100 000 draws per variant: the standard error of a Monte Carlo probability is ≤ √(0.25/10⁵) = 0.0016.
DRAWS: Final = 100_000
# The credible interval of the lift: central 95 %.
CI_LEVEL: Final = 0.95
# Pseudo-users of the revenue model's prior, spread over the pooled revenue levels. The design note
# (§3) proposed 10; measured on the same 3 000 A/A experiments (6 % payers at 4.99/9.99/49.99),
# "chance to beat control ≥ 95 %" fired in 5.5 % at κ = 10, 4.9 % at 100 and 3.7 % at 300 with
# 1 000 users an arm (~60 payers), and 5.4 / 5.2 / 4.8 % with 5 000: a bootstrap reads the noise of
# a few large purchases as signal, and the pooled prior steadies it. 100 users is little beside the
# thousands an arm a revenue test needs, so it costs little power there.
REVENUE_PRIOR_USERS: Final = 100.0
# The revenue model's levels are capped (see `_coarsen`) and drawn in chunks, so that memory stays
# about chunk × levels × 8 bytes (20 MB) whatever the data.
MAX_REVENUE_LEVELS: Final = 256
_CHUNK: Final = 10_000
# The sample-ratio check: the alarm level, the looks it is corrected for (a refresh every 6 h
# for 28 days) and the minimum expected users per cell before it may flag (design note §0.2).
SRM_ALPHA: Final = 0.001
SRM_PLANNED_LOOKS: Final = 4 * 28
SRM_MIN_EXPECTED: Final = 100.0


def monte_carlo_seed(experiment_id: str, as_of: datetime) -> int:
    """The seed of an experiment's draws: SHA-256 of (experiment id, as-of), 64 bits.

    Why these two: the same data read again (a retried run, a second API host) must show the same
    figures, while new data (a later as-of) may draw anew; nothing else about the run may matter."""
    digest = hashlib.sha256(f"{experiment_id}\x1f{as_of.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@dataclass(frozen=True)
class Lift:
    mean: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class VariantFigures:
    """One variant's figures; the control's `chance_to_beat_control` and `lift_vs_control` are None
    (it does not beat itself), and every figure is None when some variant has no data yet."""

    variant_id: str
    chance_to_beat_control: float | None
    chance_to_be_best: float | None
    lift_vs_control: Lift | None
    expected_loss: float | None


def _empty(variant_ids: Sequence[str]) -> list[VariantFigures]:
    return [VariantFigures(v, None, None, None, None) for v in variant_ids]


def _from_draws(
    variant_ids: Sequence[str], draws: FloatArray, beat: Sequence[float] | None = None
) -> list[VariantFigures]:
    """Figures from posterior draws of each variant's metric (draws × variants). `beat` replaces the
    Monte Carlo chance to beat control where a closed form exists."""
    best = draws.max(axis=1)
    winner = draws.argmax(axis=1)
    k = draws.shape[1]
    p_best = np.bincount(winner, minlength=k) / draws.shape[0]
    loss = (best[:, None] - draws).mean(axis=0)
    control = draws[:, 0]
    tail = (1.0 - CI_LEVEL) / 2.0
    out = [VariantFigures(variant_ids[0], None, float(p_best[0]), None, float(loss[0]))]
    for j in range(1, k):
        with np.errstate(divide="ignore", invalid="ignore"):
            lift = draws[:, j] / control - 1.0
        lift = lift[np.isfinite(lift)]
        low, high = np.quantile(lift, [tail, 1.0 - tail]) if lift.size else (np.nan, np.nan)
        ctw = float(beat[j]) if beat is not None else float((draws[:, j] > control).mean())
        out.append(
            VariantFigures(
                variant_ids[j],
                ctw,
                float(p_best[j]),
                Lift(float(lift.mean()) if lift.size else float("nan"), float(low), float(high)),
                float(loss[j]),
            )
        )
    return out


def beta_chance_to_beat(control: tuple[int, int], variant: tuple[int, int]) -> float:
    """P(p_variant > p_control) for (successes, trials) under Beta(1, 1) priors: Evan Miller's exact sum."""
    a, b = _posterior(*control), _posterior(*variant)
    return float(prob_greater(a, b))


def beta_expected_loss(control: tuple[int, int], variant: tuple[int, int]) -> float:
    """E[max(p_control − p_variant, 0)]: what shipping the variant gives up if the control is better.

    Stucchio's closed form (VWO SmartStats): loss = α_A/(α_A+β_A)·h(α_A+1, β_A, α_B, β_B)
    − α_B/(α_B+β_B)·h(α_A, β_A, α_B+1, β_B) with h(a, b, c, d) = P(Beta(a, b) > Beta(c, d))."""
    a, b = _posterior(*control), _posterior(*variant)
    aa, ba, ab, bb = float(a.alpha), float(a.beta), float(b.alpha), float(b.beta)
    return max(0.0, aa / (aa + ba) * _h(aa + 1, ba, ab, bb) - ab / (ab + bb) * _h(aa, ba, ab + 1, bb))


def _h(a: float, b: float, c: float, d: float) -> float:
    return float(prob_greater(BetaPosterior(np.array(c), np.array(d)), BetaPosterior(np.array(a), np.array(b))))


def _posterior(successes: int, trials: int) -> BetaPosterior:
    if not 0 <= successes <= trials:
        raise ValueError(f"successes ({successes}) must lie between 0 and the trials ({trials})")
    return BetaPosterior(np.array(1.0 + successes), np.array(1.0 + trials - successes))


def rate_figures(
    variant_ids: Sequence[str],
    successes: Sequence[int],
    trials: Sequence[int],
    seed: int,
    draws: int = DRAWS,
) -> list[VariantFigures]:
    """The figures of a rate metric (Beta-Binomial). Chance to beat control is exact; with two
    variants so are chance to be best and expected loss; with more they come from `draws` seeded
    draws (expected loss then against the best of all, of which the two-variant loss is the case K = 2)."""
    if not len(variant_ids) == len(successes) == len(trials) or len(variant_ids) < 2:
        raise ValueError("one (successes, trials) per variant, and at least two variants")
    if min(trials) <= 0:
        return _empty(variant_ids)
    posts = [_posterior(s, n) for s, n in zip(successes, trials, strict=True)]
    control = (successes[0], trials[0])
    beat = [0.5] + [beta_chance_to_beat(control, (s, n)) for s, n in zip(successes[1:], trials[1:], strict=True)]
    rng = np.random.default_rng(seed)
    sample = np.column_stack([rng.beta(float(p.alpha), float(p.beta), size=draws) for p in posts])
    figures = _from_draws(variant_ids, sample, beat)
    if len(variant_ids) == 2:
        treatment = (successes[1], trials[1])
        c, t = figures
        figures = [
            VariantFigures(c.variant_id, None, 1.0 - beat[1], None, beta_expected_loss(treatment, control)),
            VariantFigures(t.variant_id, beat[1], beat[1], t.lift_vs_control, beta_expected_loss(control, treatment)),
        ]
    return figures


def revenue_levels(values: Sequence[float] | FloatArray) -> dict[float, int]:
    """Users per revenue level, levels rounded to cents (the model's input from per-user revenue)."""
    rounded = np.round(np.asarray(values, dtype=np.float64), 2)
    levels, counts = np.unique(rounded, return_counts=True)
    return {float(v): int(c) for v, c in zip(levels, counts, strict=True)}


def revenue_figures(
    variant_ids: Sequence[str],
    levels: Sequence[Mapping[float, int]],
    seed: int,
    draws: int = DRAWS,
    prior_users: float = REVENUE_PRIOR_USERS,
) -> list[VariantFigures]:
    """The figures of revenue per user: a Bayesian bootstrap over revenue levels (module docstring).

    `levels[i]` maps a revenue value to the number of variant i's (matured) users who reached it.
    Dirichlet draws are normalised Gamma draws; every figure is Monte Carlo from `draws` seeded draws."""
    if len(variant_ids) != len(levels) or len(variant_ids) < 2:
        raise ValueError("one level histogram per variant, and at least two variants")
    if any(sum(h.values()) <= 0 for h in levels):
        return _empty(variant_ids)
    values = np.array(sorted({v for h in levels for v in h}), dtype=np.float64)
    counts = np.array([[h.get(float(v), 0) for v in values] for h in levels], dtype=np.float64)
    values, counts = _coarsen(values, counts, MAX_REVENUE_LEVELS)
    pooled = counts.sum(axis=0) / counts.sum()
    rng = np.random.default_rng(seed)
    columns = []
    for row in counts:
        shape = row + prior_users * pooled
        chunks = []
        for start in range(0, draws, _CHUNK):
            gamma = rng.standard_gamma(shape, size=(min(_CHUNK, draws - start), values.size))
            chunks.append((gamma @ values) / gamma.sum(axis=1))
        columns.append(np.concatenate(chunks))
    return _from_draws(variant_ids, np.column_stack(columns))


def _coarsen(values: FloatArray, counts: FloatArray, max_levels: int) -> tuple[FloatArray, FloatArray]:
    """At most `max_levels` levels: neighbouring levels merged into groups of about equal pooled
    users, each valued at its pooled users' mean (so the pooled ARPU is unchanged).

    Why: amounts converted into the reporting currency at daily rates spread a few prices over
    hundreds of cent values, and the draws cost draws × levels; a paywall's own price points stay
    apart (each holds many users), only sparse neighbours merge."""
    if values.size <= max_levels:
        return values, counts
    pooled = counts.sum(axis=0)
    before = np.cumsum(pooled) - pooled
    group = np.floor(before / pooled.sum() * max_levels).astype(np.int64)
    _, group = np.unique(group, return_inverse=True)
    size = int(group.max()) + 1
    weight = np.bincount(group, weights=pooled, minlength=size)
    merged_values = np.asarray(np.bincount(group, weights=pooled * values, minlength=size) / weight, dtype=np.float64)
    merged_counts = np.asarray(
        np.stack([np.bincount(group, weights=row, minlength=size) for row in counts]), dtype=np.float64
    )
    return merged_values, merged_counts


# ---------------------------------------------------------------- sample-ratio mismatch


@dataclass(frozen=True)
class SampleRatio:
    """The sample-ratio check of an experiment.

    `p_value` is the χ² p-value of observed vs expected cells corrected for the planned looks
    (Bonferroni: min(1, raw × looks)), so `flagged` is the issue's "p < 0.001" on it; `raw_p_value`
    is the single-look p-value. `flagged` also requires every cell to expect ≥ `SRM_MIN_EXPECTED`
    users, unless traffic reached a cell that expects none (certainly broken)."""

    p_value: float
    raw_p_value: float
    flagged: bool
    chi2: float
    df: int
    observed: dict[str, int]
    expected: dict[str, float]


def expected_counts(
    exposures_by_version: Mapping[int, Mapping[str, int]], shares_by_version: Mapping[int, Mapping[str, float]]
) -> dict[str, float]:
    """E_i = Σ_versions (exposures in the version) × share_i of that version.

    Why per version: sticky exposures keep earlier users where they were while new users follow the
    weights in force, so the current weights alone would cry SRM after every weight change."""
    expected: dict[str, float] = {}
    for version, cells in exposures_by_version.items():
        if version not in shares_by_version:
            raise ValueError(f"no weights for experiment version {version}")
        total = sum(cells.values())
        for cell, share in shares_by_version[version].items():
            expected[cell] = expected.get(cell, 0.0) + total * share
    return expected


def sample_ratio(
    exposures_by_version: Mapping[int, Mapping[str, int]],
    shares_by_version: Mapping[int, Mapping[str, float]],
    looks: int = SRM_PLANNED_LOOKS,
    alpha: float = SRM_ALPHA,
    min_expected: float = SRM_MIN_EXPECTED,
) -> SampleRatio:
    """The look-corrected χ² sample-ratio check over all cells (holdout included).

    Why Bonferroni over the planned looks: the check runs at every 6-hourly refresh, and 112 looks at
    p < 0.001 flag about 1 % of healthy experiments (design note §0.2); at 0.001/112 per look the
    chance of any false flag over 28 days is ≤ 0.1 %. It is simpler than GrowthBook's sequential
    Bayes factor, needs no prior, and the A/A harness measures what it costs in power. When weights
    changed, the observed cells are a sum of multinomials with different shares whose variance is at
    most the χ²'s, so the test stays valid (slightly conservative)."""
    observed: dict[str, int] = {}
    for cells in exposures_by_version.values():
        for cell, count in cells.items():
            observed[cell] = observed.get(cell, 0) + int(count)
    expected = expected_counts(exposures_by_version, shares_by_version)
    names = sorted(set(observed) | set(expected))
    o = np.array([observed.get(c, 0) for c in names], dtype=np.float64)
    e = np.array([expected.get(c, 0.0) for c in names], dtype=np.float64)
    live = e > 0
    stray = bool(np.any(~live & (o > 0)))
    df = int(live.sum()) - 1
    total = float(o.sum())
    if stray:
        chi2, raw = float("inf"), 0.0
    elif total <= 0 or df < 1:
        chi2, raw = 0.0, 1.0
    else:
        chi2 = float((((o - e) ** 2)[live] / e[live]).sum())
        raw = float(special.chdtrc(df, chi2))
    p = min(1.0, raw * looks)
    enough = bool(live.any()) and float(e[live].min()) >= min_expected
    return SampleRatio(
        p_value=p,
        raw_p_value=raw,
        flagged=stray or (enough and p < alpha),
        chi2=chi2,
        df=max(df, 0),
        observed={c: observed.get(c, 0) for c in names},
        expected={c: expected.get(c, 0.0) for c in names},
    )
