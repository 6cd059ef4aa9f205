"""LTV projection: a shifted-beta-geometric (sBG) retention model times revenue per active week.

sBG (Fader & Hardie, "How to project customer retention", 2007): each user churns each week
with probability theta, theta ~ Beta(alpha, beta) across users; the survival curve is
S(0) = 1, S(t) = S(t-1) * (beta + t - 1) / (alpha + beta + t - 1). It captures the typical
shape of app retention (steep early, flattening later, because the loyal remain) with two
parameters, fit here by maximum likelihood on the observed weekly retention curve.

The fit is a two-parameter smooth problem, so a small Nelder-Mead on (log alpha, log beta)
does it in a millisecond; scipy would be a large dependency for this one call.

Projection per install over HORIZON_WEEKS: the revenue per install observed through the last
complete week K, plus rho x S(w) for each later week w, where rho is the net revenue per active
user-week in weeks 2..K (the steady state after the first charges of week 0-1).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from transforms.reports.schemas import LTV_SCHEMA

HORIZON_WEEKS = 52  # LTV is a one-year projection
STEADY_FROM_WEEK = 2  # first charges (trial conversions) land in weeks 0-1; steady renewals after


def sbg_survival(alpha: float, beta: float, weeks: int) -> list[float]:
    """S(0..weeks-1)."""
    out = [1.0]
    for t in range(1, weeks):
        out.append(out[-1] * (beta + t - 1) / (alpha + beta + t - 1))
    return out[:weeks]


def _log_likelihood(alpha: float, beta: float, retention: Sequence[float]) -> float:
    """Per-user log likelihood of the curve: a share r[t-1]-r[t] churned at t, r[T] survives."""
    survival = sbg_survival(alpha, beta, len(retention))
    total = 0.0
    for t in range(1, len(retention)):
        dead = retention[t - 1] - retention[t]
        if dead > 0:
            total += dead * math.log(max(survival[t - 1] - survival[t], 1e-300))
    return total + retention[-1] * math.log(max(survival[-1], 1e-300))


def _nelder_mead(f: Callable[[list[float]], float], start: list[float], steps: int = 400) -> list[float]:
    """Minimize f from start (2-D simplex; standard reflection/expansion/contraction/shrink)."""
    simplex = [start, [start[0] + 0.5, start[1]], [start[0], start[1] + 0.5]]
    values = [f(p) for p in simplex]
    for _ in range(steps):
        order = sorted(range(3), key=values.__getitem__)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[2] - values[0]) < 1e-12:
            break
        centroid = [(simplex[0][i] + simplex[1][i]) / 2 for i in range(2)]
        worst = simplex[2]
        reflected = [centroid[i] + (centroid[i] - worst[i]) for i in range(2)]
        fr = f(reflected)
        if fr < values[0]:
            expanded = [centroid[i] + 2 * (centroid[i] - worst[i]) for i in range(2)]
            fe = f(expanded)
            simplex[2], values[2] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[1]:
            simplex[2], values[2] = reflected, fr
        else:
            contracted = [centroid[i] + 0.5 * (worst[i] - centroid[i]) for i in range(2)]
            fc = f(contracted)
            if fc < values[2]:
                simplex[2], values[2] = contracted, fc
            else:
                best = simplex[0]
                simplex = [best] + [[best[i] + 0.5 * (p[i] - best[i]) for i in range(2)] for p in simplex[1:]]
                values = [values[0]] + [f(p) for p in simplex[1:]]
    return simplex[min(range(3), key=values.__getitem__)]


def fit_sbg(retention: Sequence[float]) -> tuple[float, float]:
    """(alpha, beta) maximizing the likelihood of a retention curve r[0..T] (r[0] = 1).

    The curve is made non-increasing first (activity-based retention can tick up when users
    come back; survival cannot)."""
    curve: list[float] = []
    for r in retention:
        curve.append(min(max(r, 0.0), curve[-1] if curve else 1.0))
    if len(curve) < 2:
        return 1.0, 1.0
    bounded = lambda p: [min(max(v, -7.0), 9.0) for v in p]  # noqa: E731  (alpha, beta in [1e-3, 8e3])

    def loss(p: list[float]) -> float:
        a, b = (math.exp(v) for v in bounded(p))
        return -_log_likelihood(a, b, curve)

    best = bounded(_nelder_mead(loss, [0.0, 0.5]))
    return math.exp(best[0]), math.exp(best[1])


@dataclass(frozen=True)
class Projection:
    alpha: float
    beta: float
    observed_weeks: int
    revenue_per_active_week: float
    observed_revenue_per_install: float

    def cumulative_revenue_per_install(self, through_week: int) -> float:
        """Observed revenue through the last observed week, plus the modeled tail to through_week."""
        survival = sbg_survival(self.alpha, self.beta, through_week + 1)
        tail = sum(survival[self.observed_weeks : through_week + 1])
        return self.observed_revenue_per_install + self.revenue_per_active_week * tail


def project(installs: Sequence[int], active: Sequence[int], net_revenue: Sequence[float]) -> Projection:
    """Fit one group's aggregated weekly curve: per week w (0..K), the installs of the cohorts
    whose week w is complete, their active users and their net revenue in week w."""
    weeks = [w for w in range(len(installs)) if installs[w] > 0]
    k = len(weeks)
    retention = [active[w] / installs[w] for w in weeks]
    alpha, beta = fit_sbg(retention)
    steady = [w for w in weeks if w >= STEADY_FROM_WEEK] or weeks
    active_weeks = sum(active[w] for w in steady)
    rho = sum(net_revenue[w] for w in steady) / active_weeks if active_weeks else 0.0
    observed = sum(net_revenue[w] / installs[w] for w in weeks)
    return Projection(alpha, beta, k, rho, observed)


def ltv_projections(curves: pl.DataFrame) -> pl.DataFrame:
    """LTV per workspace x dimension x value from cohort curves (COHORT_CURVE_SCHEMA): all the
    group's cohorts pooled per week. A small collected frame in, one row per group out (the fit
    is iterative, so this is the one transform that loops, over groups, not rows)."""
    pooled = (
        curves.group_by("workspace_id", "dimension", "value", "week")
        .agg(pl.col("installs", "active_users", "net_revenue").sum())
        .sort("week")
        .group_by("workspace_id", "dimension", "value", maintain_order=True)
        .agg(pl.col("installs", "active_users", "net_revenue"), pl.col("installs").first().alias("cohort_installs"))
        .sort("workspace_id", "dimension", "value")
    )
    rows = []
    for r in pooled.iter_rows(named=True):
        p = project(r["installs"], r["active_users"], r["net_revenue"])
        rows.append(
            {
                "workspace_id": r["workspace_id"],
                "dimension": r["dimension"],
                "value": r["value"],
                "installs": r["cohort_installs"],
                "alpha": p.alpha,
                "beta": p.beta,
                "observed_weeks": p.observed_weeks,
                "revenue_per_active_week": p.revenue_per_active_week,
                "ltv_projected": p.cumulative_revenue_per_install(HORIZON_WEEKS - 1),
            }
        )
    return pl.DataFrame(rows, schema=LTV_SCHEMA)
