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

Stability (issue 15): a group's late weeks rest on its oldest cohorts only, often a handful of
users, and a small group's every week does. Fitted on the shares alone (each week weighing the
same), one renewal or one returning user in such a week moved a campaign's LTV from 2.84 to
17.71. So each week weighs by the users it is estimated from (a binomial likelihood), and every
group is shrunk to its workspace's pooled curve (all groups of the same dimension) the
empirical-Bayes way: PRIOR_USERS pseudo-users per week who behave like the pool enter the
retention fit, each week's revenue increment and rho. A group of n users per week keeps
n / (n + PRIOR_USERS) of its own evidence: a large group is barely moved, a small one leans on
the workspace until its own data can carry it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from transforms.reports.schemas import LTV_SCHEMA

HORIZON_WEEKS = 52  # LTV is a one-year projection
STEADY_FROM_WEEK = 2  # first charges (trial conversions) land in weeks 0-1; steady renewals after
# Pseudo-users per week from the workspace's pooled curve. 60: a week of 60 real users is half
# its own, half the pool's (its retention's 95 % interval is then about +-13 points, the pool's
# far narrower); a campaign week of several hundred users keeps most of its own weight. On a
# 300-user workspace one added renewal moved a group's 52-week LTV by at most about 2 (a third)
# with 60, 2.5-3 with 30, up to 31 before (tests/transforms/test_ltv.py); fitted on 8 weeks of
# 3000 users, campaigns' LTVs came within the same distance of the truth with 30 or 60.
PRIOR_USERS = 60


def sbg_survival(alpha: float, beta: float, weeks: int) -> list[float]:
    """S(0..weeks-1)."""
    out = [1.0]
    for t in range(1, weeks):
        out.append(out[-1] * (beta + t - 1) / (alpha + beta + t - 1))
    return out[:weeks]


def _log_likelihood(
    alpha: float, beta: float, retention: Sequence[float], users: Sequence[float], prior: Sequence[float], weight: float
) -> float:
    """Binomial log likelihood of each week's retained share r[w] among its users n[w] (weeks
    1..T; the same users across weeks is ignored, a pseudo-likelihood), plus `weight`
    pseudo-users per week retained at the prior curve's share."""
    survival = sbg_survival(alpha, beta, len(retention))
    total = 0.0
    for t in range(1, len(retention)):
        s = min(max(survival[t], 1e-12), 1 - 1e-12)
        kept = users[t] * retention[t] + weight * prior[t]
        lost = users[t] * (1 - retention[t]) + weight * (1 - prior[t])
        total += kept * math.log(s) + lost * math.log(1 - s)
    return total


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


def fit_sbg(
    retention: Sequence[float],
    users: Sequence[float] | None = None,
    prior: Sequence[float] | None = None,
    prior_users: float = 0.0,
    prior_spread: float | None = None,
) -> tuple[float, float]:
    """(alpha, beta) maximizing the likelihood of a retention curve r[0..T] (r[0] = 1), each
    week weighted by its users (None: equal weights), with `prior_users` pseudo-users per week
    following the `prior` curve (the workspace's pooled retention); with `prior_spread` (the
    pool's alpha + beta), the log of alpha + beta is held to it with the weight of
    `prior_users` per week.

    Why the spread: a few weeks pin the mean churn alpha / (alpha + beta) well but hardly its
    spread across users (alpha + beta), and the spread decides the whole tail: one extra active
    user in a group's last week moved (alpha, beta) from (6.2, 43) to (1.9, 12) and its 52-week
    LTV by 40 %. How loyal the loyal users are is a property of the product more than of one
    campaign, so a group departs from the workspace's spread only as far as its data insist."""
    curve = [min(max(r, 0.0), 1.0) for r in retention]
    if len(curve) < 2:
        return 1.0, 1.0
    weights = list(users) if users is not None else [1.0] * len(curve)
    pooled = [min(max(r, 0.0), 1.0) for r in prior] if prior is not None else curve
    bounded = lambda p: [min(max(v, -7.0), 9.0) for v in p]  # noqa: E731  (alpha, beta in [1e-3, 8e3])

    def loss(p: list[float]) -> float:
        a, b = (math.exp(v) for v in bounded(p))
        penalty = 0.0
        if prior_spread is not None:
            penalty = prior_users * (len(curve) - 1) * math.log((a + b) / prior_spread) ** 2
        return penalty - _log_likelihood(a, b, curve, weights, pooled, prior_users)

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


@dataclass(frozen=True)
class Pool:
    """The workspace's pooled weekly curve for one dimension (all its groups summed): per week,
    the retained share and the net revenue per install; and the net revenue per active
    user-week of the steady weeks (rho)."""

    retention: list[float]
    revenue_per_install: list[float]
    revenue_per_active_week: float
    spread: float | None = None  # alpha + beta of the pool's own sBG fit

    @classmethod
    def of(cls, installs: Sequence[int], active: Sequence[int], net_revenue: Sequence[float]) -> Pool:
        weeks = [w for w in range(len(installs)) if installs[w] > 0]
        steady = [w for w in weeks if w >= STEADY_FROM_WEEK] or weeks
        active_weeks = sum(active[w] for w in steady)
        rho = sum(net_revenue[w] for w in steady) / active_weeks if active_weeks else 0.0
        retention = [active[w] / installs[w] for w in weeks]
        # A steady week's revenue is the pool's rho times its retention, not the week's own sum:
        # the pool's late weeks also rest on its oldest cohorts only, and one charge there
        # would otherwise move every group shrunk to it.
        revenue = [net_revenue[w] / installs[w] if w < STEADY_FROM_WEEK else rho * retention[w] for w in weeks]
        alpha, beta = fit_sbg(retention, [installs[w] for w in weeks])
        return cls(retention, revenue, rho, alpha + beta)


def project(
    installs: Sequence[int],
    active: Sequence[int],
    net_revenue: Sequence[float],
    pool: Pool | None = None,
    prior_users: float = PRIOR_USERS,
) -> Projection:
    """Fit one group's aggregated weekly curve: per week w (0..K), the installs of the cohorts
    whose week w is complete, their active users and their net revenue in week w. With a
    `pool`, each week gets `prior_users` pseudo-users behaving like the pool (None: the group
    alone)."""
    weeks = [w for w in range(len(installs)) if installs[w] > 0]
    k = len(weeks)
    m = prior_users if pool is not None else 0.0
    base = pool or Pool([0.0] * k, [0.0] * k, 0.0)

    def pooled(values: list[float], w: int) -> float:
        return values[w] if w < len(values) else values[-1] if values else 0.0

    retention = [active[w] / installs[w] for w in weeks]
    prior = [pooled(base.retention, w) for w in weeks]
    alpha, beta = fit_sbg(retention, [installs[w] for w in weeks], prior, m, base.spread)
    steady = [w for w in weeks if w >= STEADY_FROM_WEEK] or weeks
    prior_active = m * sum(pooled(base.retention, w) for w in steady)
    active_weeks = sum(active[w] for w in steady) + prior_active
    revenue = sum(net_revenue[w] for w in steady) + prior_active * base.revenue_per_active_week
    rho = revenue / active_weeks if active_weeks else 0.0
    observed = sum((net_revenue[w] + m * pooled(base.revenue_per_install, w)) / (installs[w] + m) for w in weeks)
    return Projection(alpha, beta, k, rho, observed)


def ltv_projections(curves: pl.DataFrame) -> pl.DataFrame:
    """LTV per workspace x dimension x value from cohort curves (COHORT_CURVE_SCHEMA): all the
    group's cohorts pooled per week (the table holds complete weeks only, so week w's installs
    are exactly the users whose week w is over: censoring-correct), each group shrunk to its
    workspace's pooled curve of the same dimension. A small collected frame in, one row per
    group out (the fit is iterative, so this is the one transform that loops, over groups, not
    rows)."""
    weekly = curves.group_by("workspace_id", "dimension", "value", "week").agg(
        pl.col("installs", "active_users", "net_revenue").sum()
    )
    pools = {
        (r["workspace_id"], r["dimension"]): Pool.of(r["installs"], r["active_users"], r["net_revenue"])
        for r in weekly.group_by("workspace_id", "dimension", "week")
        .agg(pl.col("installs", "active_users", "net_revenue").sum())
        .sort("week")
        .group_by("workspace_id", "dimension", maintain_order=True)
        .agg(pl.col("installs", "active_users", "net_revenue"))
        .iter_rows(named=True)
    }
    pooled = (
        weekly.sort("week")
        .group_by("workspace_id", "dimension", "value", maintain_order=True)
        .agg(pl.col("installs", "active_users", "net_revenue"), pl.col("installs").first().alias("cohort_installs"))
        .sort("workspace_id", "dimension", "value")
    )
    rows = []
    for r in pooled.iter_rows(named=True):
        p = project(r["installs"], r["active_users"], r["net_revenue"], pools[r["workspace_id"], r["dimension"]])
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
