# The formulas are written as the design note writes them (α, β, −); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""What the dashboard's Experiments page draws for an experiment's primary metric. Pure: the
stored results' variants (the `results` document of `transforms.experiments.results`) in, the
curves or intervals out.

- For a rate metric (`trial_start_rate`, `paid_conversion_rate`) each variant's posterior is the
  Beta(1 + s, 1 + n − s) the results' statistics use (`transforms.experiments.statistics`, a
  Beta(1, 1) prior; a test holds the two together), s the variant's trial starts or paid
  conversions and n its exposed users. Its density is drawn over the range where the mass of all
  the variants lies (central 99.98 % of each), `POINTS` points per variant on its own range, so a
  narrow peak is drawn as finely as a wide one.
- For `revenue_per_user_d14` the stored results hold no closed-form posterior (the Bayesian
  bootstrap's draws are not kept), so the page shows each treatment's lift against the control
  as its 95 % credible interval instead: what the results do hold.

Nothing is invented: a variant with no exposed user has no curve (its posterior would be the flat
prior, which says nothing about the variant), and a treatment whose lift is null has no interval.
Imports scipy.special only, as the statistics do (the note in transforms/actions/statistics.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
from scipy import special  # type: ignore[import-untyped]  # scipy ships no stubs

RATE_METRICS: Final = {"trial_start_rate": "trial_starts", "paid_conversion_rate": "paid_conversions"}
# The prior the results' statistics use for rates: Beta(1, 1), uniform on [0, 1].
PRIOR_ALPHA: Final = 1.0
PRIOR_BETA: Final = 1.0
# Points per variant's curve: smooth at any width the page is drawn at, a few kB of JSON each.
POINTS: Final = 300
# The tails left out of each variant's range: the curve covers its central 1 − 2·TAIL of the mass.
TAIL: Final = 1e-4


@dataclass(frozen=True)
class DensityCurve:
    """One variant's posterior density: Beta(alpha, beta) at `x` (rates, as fractions)."""

    variant_id: str
    alpha: float
    beta: float
    x: list[float]
    density: list[float]

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The central credible interval of the rate (the quantiles of the Beta)."""
        tail = (1.0 - level) / 2.0
        low, high = special.betaincinv(self.alpha, self.beta, [tail, 1.0 - tail])
        return float(low), float(high)


@dataclass(frozen=True)
class PosteriorChart:
    """The curves of the variants with data, in the experiment's order, over [x_min, x_max]."""

    metric: str
    curves: list[DensityCurve]
    x_min: float
    x_max: float


@dataclass(frozen=True)
class LiftInterval:
    """A treatment's lift against the control: posterior mean and 95 % credible interval (fractions)."""

    variant_id: str
    mean: float
    ci_low: float
    ci_high: float


def beta_parameters(successes: int, exposed: int) -> tuple[float, float]:
    """The posterior Beta(α, β) of a rate after `successes` of `exposed` users."""
    if not 0 <= successes <= exposed:
        raise ValueError(f"successes ({successes}) must lie between 0 and the exposed users ({exposed})")
    return PRIOR_ALPHA + successes, PRIOR_BETA + exposed - successes


def beta_density(alpha: float, beta: float, x: Sequence[float] | np.ndarray) -> np.ndarray:
    """The Beta(α, β) density at `x`, in logs until the end so that large α, β do not overflow."""
    at = np.asarray(x, dtype=np.float64)
    log = special.xlogy(alpha - 1.0, at) + special.xlog1py(beta - 1.0, -at) - special.betaln(alpha, beta)
    return np.asarray(np.exp(log), dtype=np.float64)


def _curve(variant_id: str, alpha: float, beta: float, points: int) -> DensityCurve:
    low, high = special.betaincinv(alpha, beta, [TAIL, 1.0 - TAIL])
    x = np.linspace(float(low), float(high), points)
    return DensityCurve(variant_id, alpha, beta, x.tolist(), beta_density(alpha, beta, x).tolist())


def rate_posteriors(
    metric: str, variants: Sequence[Mapping[str, Any]], *, points: int = POINTS
) -> PosteriorChart | None:
    """The posterior density of each variant's rate, from the stored results' variants
    (`variant_id`, `exposed_users` and the metric's count). None when the metric is not a rate
    or no variant has an exposed user yet."""
    column = RATE_METRICS.get(metric)
    if column is None:
        return None
    curves = []
    for v in variants:
        exposed = int(v["exposed_users"])
        if exposed <= 0:
            continue  # the flat prior: no curve without data
        alpha, beta = beta_parameters(int(v[column]), exposed)
        curves.append(_curve(str(v["variant_id"]), alpha, beta, points))
    if not curves:
        return None
    return PosteriorChart(
        metric=metric,
        curves=curves,
        x_min=min(c.x[0] for c in curves),
        x_max=max(c.x[-1] for c in curves),
    )


def lift_intervals(variants: Sequence[Mapping[str, Any]]) -> list[LiftInterval]:
    """Each treatment's stored lift against the control with its credible interval; the control
    (whose lift is null) and treatments without a complete lift are left out."""
    out = []
    for v in variants:
        lift = v.get("lift_vs_control")
        if not lift or any(lift.get(k) is None for k in ("mean", "ci_low", "ci_high")):
            continue
        out.append(
            LiftInterval(str(v["variant_id"]), float(lift["mean"]), float(lift["ci_low"]), float(lift["ci_high"]))
        )
    return out
