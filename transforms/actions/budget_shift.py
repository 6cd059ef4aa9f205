# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF003
"""The budget-shift rule family (design note §5.2): move daily budget from campaign S to campaign T
when T's country-standardised ROAS beats S's, sized within the policy's leg and portfolio caps.
Pure; `proposals` runs it with the other families."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import polars as pl

from transforms.actions import ActionContent
from transforms.actions import decisions as dec
from transforms.actions import statistics as st
from transforms.actions.evidence import (
    COMPARE_WINDOW_DAYS,
    ENGINE_VERSION,
    Context,
    Evaluation,
    RegistryCampaign,
    common_checks,
    entity,
    fingerprint,
    guardrail,
    json_safe,
    learning_check,
    money_text,
    pct,
    signed_pct,
)
from transforms.actions.rules import RollbackRule
from transforms.reports.schemas import ORGANIC

# The generator's sizing and windows (the decision thresholds are in `decisions`).
# A horizon is used when at least this many weekly cohorts have it complete (§2.3).
WEEKLY_COHORTS_FOR_D30 = 4
SHIFT_MIN_SPEND_CPIS = 20  # each side spent at least 20 of its own installs' cost
IMPACT_HAIRCUT = 0.5  # marginal return < average return (§5.2, an assumption)
MIN_SHIFT_SHARE_OF_TARGET = 0.05  # skip shifts smaller than 5 % of the recipient's budget


# --- budget shift ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Side:
    installs: int
    spend: float
    net: float
    roas: float  # raw ROAS_D of the window
    std_roas: float  # country-standardised
    std_var: float  # variance of the standardised ROAS estimate


def horizon(signals: pl.DataFrame) -> tuple[int, date | None]:
    """(D, newest cohort with D complete): D = 30 when ≥ 4 weekly cohorts have 30 complete days, else 14,
    which `decisions.shift_bar` decides at a stricter bar (§2.3)."""
    for h in (30, 14):
        done = signals.filter(pl.col("complete_days") >= h)
        if done.is_empty():
            continue
        newest = done.get_column("cohort_date").max()
        oldest = done.get_column("cohort_date").min()
        assert isinstance(newest, date) and isinstance(oldest, date)
        if (newest - oldest).days + 1 >= 7 * WEEKLY_COHORTS_FOR_D30 or h == 14:
            return h, newest
    return 14, None


def _shift_window(signals: pl.DataFrame, h: int, newest: date) -> pl.DataFrame:
    first = newest - timedelta(days=COMPARE_WINDOW_DAYS - 1)
    return signals.filter(
        (pl.col("complete_days") >= h)
        & pl.col("cohort_date").is_between(first, newest)
        & (pl.col("campaign") != ORGANIC)
    )


def _by_country(window: pl.DataFrame, h: int) -> pl.DataFrame:
    return window.group_by("campaign", "country").agg(
        pl.col("installs").sum(),
        pl.col("spend").sum(),
        pl.col(f"net_rev_d{h}").sum().alias("net"),
        pl.col(f"net_rev_sq_d{h}").sum().alias("net_sq"),
    )


def _sides(per_country: pl.DataFrame, source: str, target: str) -> tuple[_Side, _Side, dict[str, float]] | None:
    """Both campaigns' ROAS, standardised to the source's country mix over the countries both reach.

    ROAS_g = Σnet/spend in country g; its variance (spend fixed within a cohort set, §2.3) is
    var(net per user)/n_g / CPI_g². Weights: the source's installs per country, renormalised over the
    countries where both sides have ≥ 2 installs and spend (elsewhere a side's ROAS is undefined).
    """
    rows = {(r["campaign"], r["country"]): r for r in per_country.iter_rows(named=True)}
    countries = sorted({c for (k, c) in rows if k == source} & {c for (k, c) in rows if k == target})
    usable = [
        c
        for c in countries
        if all(
            (rows[(k, c)]["installs"] or 0) >= 2
            and (rows[(k, c)]["spend"] or 0) > 0
            and rows[(k, c)]["net"] is not None
            for k in (source, target)
        )
    ]
    if not usable:
        return None
    total_w = sum(rows[(source, c)]["installs"] for c in usable)
    weights = {c: rows[(source, c)]["installs"] / total_w for c in usable}

    def side(k: str) -> _Side:
        installs = sum(rows[(k, c)]["installs"] for c in countries)
        spend = sum(rows[(k, c)]["spend"] or 0.0 for c in countries)
        net = sum(rows[(k, c)]["net"] or 0.0 for c in countries)
        mean = var = 0.0
        for c in usable:
            r = rows[(k, c)]
            n, cpi = r["installs"], r["spend"] / r["installs"]
            m = st.Moments.of(n, r["net"], r["net_sq"])
            mean += weights[c] * float(m.mean) / cpi
            var += weights[c] ** 2 * float(m.variance) / n / cpi**2
        return _Side(installs, spend, net, net / spend if spend > 0 else math.nan, mean, var)

    return side(source), side(target), weights


def shift_rollback_rules(target: str, baseline_days: int, observe: int) -> tuple[RollbackRule, ...]:
    """§5.2's rollback rules of a budget shift, on the recipient T."""
    common: dict[str, Any] = {"scope_entity": "campaign", "scope_name": target, "baseline_window_days": baseline_days}
    return (
        RollbackRule(
            id="rb1", metric="cpi", comparator="gt", threshold_kind="relative_to_baseline", threshold_value=1.3,
            window_max_days=observe, min_sample_unit="installs", min_sample_value=150, grace_hours=24,
            test="confidence_sequence", alpha=st.SEQUENTIAL_ALPHA, n_star=1500, on_breach="rollback", **common,
        ),
        RollbackRule(
            id="rb2", metric="trial_rate", comparator="lt", threshold_kind="relative_to_baseline",
            threshold_value=0.8, window_max_days=observe, min_sample_unit="installs", min_sample_value=150,
            grace_hours=24, test="confidence_sequence", alpha=st.SEQUENTIAL_ALPHA, n_star=1500,
            on_breach="rollback", **common,
        ),
        RollbackRule(
            id="rb3", metric="roas_d7", comparator="lt", threshold_kind="relative_to_baseline", threshold_value=0.8,
            window_max_days=observe, min_sample_unit="users", min_sample_value=500, grace_hours=24 * 7,
            test="confidence_sequence", alpha=st.SEQUENTIAL_ALPHA, n_star=1500, on_breach="rollback", **common,
        ),
        RollbackRule(
            id="rb4", metric="daily_spend", comparator="gt", threshold_kind="relative_to_baseline",
            threshold_value=1.5, window_max_days=observe, min_sample_unit="days", min_sample_value=2,
            grace_hours=24, test="consecutive", consecutive=2, on_breach="alert", **common,
        ),
    )  # fmt: skip


def evaluate_budget_shift(
    signals: pl.DataFrame,
    ctx: Context,
    source: str,
    target: str,
    amount: float | None = None,
    own_id: str | None = None,
) -> Evaluation | None:
    """A budget shift S → T evaluated (§5.2): None when it cannot be (no budget known for either side,
    different currencies, or no country where both have data); with `amount` (a client's), that amount
    is checked instead of sized."""
    m = _measure(signals, ctx, source, target)
    if m is None:
        return None
    policy = ctx.policy

    # Size: min(leg cap of either budget, portfolio cap), floored to a whole currency unit.
    managed = sum(c.budget or 0.0 for c in ctx.registry.values() if c.currency == m.currency and c.status == "active")
    cap = min(policy.max_leg_change * m.budget_s, policy.max_leg_change * m.budget_t)
    cap = min(cap, policy.max_portfolio_change * managed)
    sized = float(math.floor(cap)) if amount is None else float(amount)
    floor_amount = MIN_SHIFT_SHARE_OF_TARGET * m.budget_t
    leg_s, leg_t = sized / m.budget_s, sized / m.budget_t
    portfolio = sized / managed if managed > 0 else math.inf

    # minimum_cohort_size: the installs that could detect the claimed lift at 80 % power.
    claimed = max(m.lift, 0.0)
    spend_ok = all(
        x.spend >= SHIFT_MIN_SPEND_CPIS * (x.spend / x.installs) if x.installs else False for x in (m.s, m.t)
    )
    label = f"ROAS {m.h}d"
    needed_txt = (
        "no lift is claimed" if not math.isfinite(m.needed) else f"a {signed_pct(claimed)} gap needs ≥ {m.needed:.0f}"
    )
    checks = [
        guardrail(
            "minimum_cohort_size",
            m.size_ok and spend_ok,
            f"{m.s.installs} installs in {source} and {m.t.installs} in {target} with {m.h} complete days "
            f"({needed_txt}; floor {dec.SHIFT_MIN_INSTALLS})",
        ),
        guardrail(
            "statistical_confidence",
            m.ctw >= m.bar and m.risk <= dec.MAX_RISK,
            f"{pct(m.ctw)} probability {target}'s {label} exceeds {source}'s "
            f"({signed_pct(m.lift)}, log-lift {m.mean:.2f} ± {m.sd:.2f}, prior N(0, 0.3²); risk {m.risk:.3f}); "
            f"needs {pct(m.bar)} and risk ≤ {dec.MAX_RISK}",
        ),
        guardrail(
            "spend_change_within_limit",
            sized > 0
            and leg_s <= policy.max_leg_change + 1e-9
            and leg_t <= policy.max_leg_change + 1e-9
            and portfolio <= policy.max_portfolio_change + 1e-9
            and sized >= floor_amount,
            f"moves {money_text(sized, m.currency)}/day: {pct(leg_s, 0)} of {source}, {pct(leg_t, 0)} of {target}, "
            f"{pct(portfolio, 0)} of managed spend (limits {pct(policy.max_leg_change, 0)}/"
            f"{pct(policy.max_leg_change, 0)}/{pct(policy.max_portfolio_change, 0)}; "
            f"at least {money_text(floor_amount, m.currency)})",
        ),
    ]
    subject = (source, target)
    fp = fingerprint(ctx.workspace_id, "budget_shift", subject, "increase_target")
    entities = frozenset({entity("campaign", source), entity("campaign", target)})
    checks += common_checks(ctx, entities, fp, own_id)
    checks.append(learning_check(ctx, (m.reg_s, m.reg_t)))
    impact = sized * (m.t.roas - m.s.roas) * IMPACT_HAIRCUT / managed if managed > 0 else 0.0
    parameters = {"from_campaign": source, "to_campaign": target, "amount_per_day": sized, "currency": m.currency}
    content = ActionContent(
        title=f"Shift {money_text(sized, m.currency)}/day from {source} to {target}",
        rationale=(
            f"{target} returns {m.t.roas:.2f} of its spend by day {m.h} against {source}'s {m.s.roas:.2f} "
            f"(cohorts {(m.newest - timedelta(days=COMPARE_WINDOW_DAYS - 1)).isoformat()}..{m.newest.isoformat()}, "
            f"country-standardised {m.t.std_roas:.2f} vs {m.s.std_roas:.2f}); moving budget toward the faster payback."
        ),
        expected_impact={"metric": f"roas_{m.h}d", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"{label}, {source}", "value": f"{m.s.roas:.2f}"},
            {"label": f"{label}, {target}", "value": f"{m.t.roas:.2f}"},
            {"label": f"{label} country-standardised, {source}", "value": f"{m.s.std_roas:.2f}"},
            {"label": f"{label} country-standardised, {target}", "value": f"{m.t.std_roas:.2f}"},
            {"label": f"Installs, {source}", "value": str(m.s.installs)},
            {"label": f"Installs, {target}", "value": str(m.t.installs)},
            {"label": f"Spend, {source}", "value": money_text(m.s.spend, m.currency)},
            {"label": f"Spend, {target}", "value": money_text(m.t.spend, m.currency)},
            {"label": f"Daily budget, {source}", "value": money_text(m.budget_s, m.currency)},
            {"label": f"Daily budget, {target}", "value": money_text(m.budget_t, m.currency)},
            {"label": "Probability the shift pays back faster", "value": pct(m.ctw)},
        ],
        guardrail_checks=checks,
    )
    return Evaluation(
        action_type="budget_shift",
        parameters=parameters,
        fingerprint=fp,
        entities=entities,
        content=content,
        rollback_rules=shift_rollback_rules(target, 14, policy.observation_days),
        evidence=json_safe(_evidence(ctx, m, managed)),
        signal=bool(m.decision.signal) and sized > 0,
        confidence=m.ctw if math.isfinite(m.ctw) else 0.0,
        sample=min(m.s.installs, m.t.installs),
        score=impact,
    )


@dataclass(frozen=True)
class _Shift:
    """What a budget shift S → T is decided on: both registry campaigns and budgets (major units),
    the horizon and newest cohort, both sides, the country weights and the decision."""

    reg_s: RegistryCampaign
    reg_t: RegistryCampaign
    budget_s: float
    budget_t: float
    currency: str
    h: int
    newest: date
    s: _Side
    t: _Side
    weights: dict[str, float]
    decision: Any

    @property
    def bar(self) -> Any:
        return self.decision.bar

    @property
    def ctw(self) -> float:
        return float(self.decision.chance_to_win)

    @property
    def mean(self) -> float:
        return float(self.decision.log_lift_mean)

    @property
    def sd(self) -> float:
        return float(self.decision.log_lift_sd)

    @property
    def risk(self) -> float:
        return float(self.decision.risk)

    @property
    def lift(self) -> float:
        return float(self.decision.lift)

    @property
    def needed(self) -> float:
        return float(self.decision.needed)

    @property
    def size_ok(self) -> bool:
        return bool(self.decision.sample_ok)


def _measure(signals: pl.DataFrame, ctx: Context, source: str, target: str) -> _Shift | None:
    """Both sides' country-standardised ROAS and the decision on them: None when the shift cannot be
    evaluated (no budget known for either side, different currencies or accounts, no common country)."""
    reg_s, reg_t = ctx.registry.get(source), ctx.registry.get(target)
    if reg_s is None or reg_t is None or reg_s.budget is None or reg_t.budget is None:
        return None  # nothing to size from and nothing the executor could change
    if reg_s.currency != reg_t.currency or reg_s.ad_account_id != reg_t.ad_account_id:
        return None  # v1: one ad account, one currency (two legs of one write)
    currency = reg_s.currency
    assert currency is not None
    h, newest = horizon(signals)
    if newest is None:
        return None
    per_country = _by_country(_shift_window(signals, h, newest), h)
    sides = _sides(per_country, source, target)
    if sides is None:
        return None
    s, t, weights = sides
    decision = dec.budget_shift(
        s.std_roas, s.std_var, s.installs, t.std_roas, t.std_var, t.installs, ctx.policy.p_decision, h
    )
    return _Shift(reg_s, reg_t, reg_s.budget, reg_t.budget, currency, h, newest, s, t, weights, decision)


def _evidence(ctx: Context, m: _Shift, managed: float) -> dict[str, Any]:
    """The sufficient statistics a budget shift was decided on (a test recomputes every number from them)."""
    policy = ctx.policy
    return {
        "engine_version": ENGINE_VERSION,
        "data_through": ctx.data_through.isoformat(),
        "as_of": ctx.as_of.isoformat(),
        "horizon_days": m.h,
        "cohorts": [(m.newest - timedelta(days=COMPARE_WINDOW_DAYS - 1)).isoformat(), m.newest.isoformat()],
        "country_weights": m.weights,
        "source": {
            "installs": m.s.installs,
            "spend": m.s.spend,
            "net": m.s.net,
            "std_roas": m.s.std_roas,
            "std_var": m.s.std_var,
        },
        "target": {
            "installs": m.t.installs,
            "spend": m.t.spend,
            "net": m.t.net,
            "std_roas": m.t.std_roas,
            "std_var": m.t.std_var,
        },
        "posterior": {
            "chance_to_win": m.ctw,
            "log_lift_mean": m.mean,
            "log_lift_sd": m.sd,
            "risk": m.risk,
            "lift": m.lift,
        },
        "thresholds": {
            "bar": m.bar,
            "min_lift": dec.SHIFT_MIN_LIFT,
            "max_risk": dec.MAX_RISK,
            "min_installs": dec.SHIFT_MIN_INSTALLS,
            "needed_installs": m.needed if math.isfinite(m.needed) else None,
        },
        "budgets": {"source": m.budget_s, "target": m.budget_t, "managed": managed, "currency": m.currency},
        "policy": policy.to_dict(),
    }
