# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF001, RUF002, RUF003
"""The actions engine's generators: signals + registry + policy → `Proposal`s (design note §5.2-5.4).

Pure and deterministic: the same signal rows, registry snapshot, policy and `as_of` give the same
proposals, byte for byte (no clock, no randomness; ties break by fingerprint). Every number an action
shows is read from `action_signals` (the same sums the reports serve) and the registry, and the
`evidence` of a proposal holds the sufficient statistics it was decided on, so a test recomputes
every data signal and guardrail detail.

Each type has one `evaluate_*` function for a named subject (the engine's candidates, the engine's
re-evaluation of an open action, and `POST /v1/actions` with parameters all go through it), and
`propose` loops over the candidates, keeps those whose signal is there, and ranks them.

Adaptations of the design note to the data, each explained where it is made:
- budget shift: a log-scale lift (`statistics.log_ratio_posterior`) instead of the relative one, and
  country-standardised ROAS (weights = the source's country mix) instead of v1's "≥ 80 % one
  country" rule, which no campaign of the demo (or of any app selling in several countries) meets;
  the spend and install floors are scaled to what a campaign of the demo brings (the power check
  carries the weight); the recipient's "budget-limited" and sBG-payback conditions are not applied
  (a sandbox budget is its spend, so "spends 90 % of its budget" is true by construction; the
  projection is a signal, not the decision, §2.3).
- creative pause: trials are matured when their cohort has `TRIAL_MATURITY_DAYS` complete days
  (the signals carry no trial length; 7 days is the longest trial of the demo and of most apps,
  + 2 days for the renewal to land); the floors are 30 matured trials for the creative and 60 for
  the rest of its campaign, the power check on the claimed gap carries the weight.
- offer test: "clearly off the workspace" is an offer converting its paywall's users to paid at
  ≥ 1.25× (or ≤ 0.75×) its own rate in the other countries, P ≥ p_decision; the design is a draft
  config (control = the paywall's most chosen other offer in that country, treatment = that offer),
  launched only by approval.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import numpy as np
import polars as pl

from transforms.actions import ActionContent, ActionType
from transforms.actions import decisions as dec
from transforms.actions import statistics as st
from transforms.actions.policy import Policy
from transforms.actions.rules import RollbackRule
from transforms.currencies import exponent
from transforms.reports.schemas import NONE_LABEL, ORGANIC

# Recorded in every evaluation; bump when a rule or a threshold changes what is proposed.
ENGINE_VERSION = "engine-2026.11-1"

# --- thresholds (design note §5.2, scaled where the data demands it; see the module docstring). The
# decision rules' own thresholds (floors, margins, lift, risk) are in `decisions`, where the engine and
# the honesty harness read them; these are the generators' windows, sizing and ranking.
# A horizon is used when at least this many weekly cohorts have it complete (§2.3).
WEEKLY_COHORTS_FOR_D30 = 4
# Cohort days compared: the 28 days ending at the newest cohort with the horizon complete.
COMPARE_WINDOW_DAYS = 28
SHIFT_MIN_SPEND_CPIS = 20  # each side spent at least 20 of its own installs' cost
IMPACT_HAIRCUT = 0.5  # marginal return < average return (§5.2, an assumption)
MIN_SHIFT_SHARE_OF_TARGET = 0.05  # skip shifts smaller than 5 % of the recipient's budget
TRIAL_MATURITY_DAYS = 9
OFFER_DOWN = 0.75
# Data older than this (the lake's newest day vs as_of) fails `data_fresh`.
FRESH_DAYS = 2
SIGNAL_LOOKBACK_DAYS = 30 + COMPARE_WINDOW_DAYS + 2  # what the engine reads


def fingerprint(workspace_id: str, action_type: str, subject: Sequence[str], direction: str) -> str:
    """sha256 of (workspace, type, subject, direction) (§5.4): the same proposal on every refresh."""
    text = json.dumps([workspace_id, action_type, list(subject), direction], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryCampaign:
    """A report campaign as the registry knows it: the budget (minor units) and its ads by creative label."""

    name: str
    ad_account_id: str
    platform: str
    daily_budget_minor: int | None
    currency: str | None
    status: str
    edited_at: datetime | None
    creatives: Mapping[str, str] = field(default_factory=dict)  # creative label -> status

    @property
    def budget(self) -> float | None:
        if self.daily_budget_minor is None or self.currency is None:
            return None
        # The registry's ISO minor units, read with the one exponent table the executor writes with.
        return self.daily_budget_minor / 10 ** exponent(self.currency)


@dataclass(frozen=True)
class OpenAction:
    id: str
    type: str
    status: str
    fingerprint: str | None
    entities: frozenset[str]


@dataclass(frozen=True)
class Rejection:
    """A human's rejection: the fingerprint, when, and the sample the rejected proposal stood on."""

    fingerprint: str
    rejected_at: datetime
    sample: int


@dataclass(frozen=True)
class Context:
    """What one refresh of one workspace knows besides the signals."""

    workspace_id: str
    as_of: datetime
    data_through: date  # the lake's newest day with events
    policy: Policy
    registry: Mapping[str, RegistryCampaign]
    open_actions: Sequence[OpenAction] = ()
    rejections: Sequence[Rejection] = ()
    # entity key ("campaign:x") -> when a FloKit action on it ended (completed / rolled back)
    cooldowns: Mapping[str, datetime] = field(default_factory=dict)


def entity(kind: str, name: str) -> str:
    return f"{kind}:{name}"


@dataclass(frozen=True)
class Evaluation:
    """One subject evaluated: the content, the parameters and whether the signal is there."""

    action_type: ActionType
    parameters: dict[str, Any]
    fingerprint: str
    entities: frozenset[str]
    content: ActionContent
    rollback_rules: tuple[RollbackRule, ...]
    evidence: dict[str, Any]
    signal: bool  # the decision rule holds (a proposal is made only then)
    confidence: float  # the posterior probability behind the signal (hysteresis reads it)
    sample: int  # the smaller side's sample (suppression reads it)
    score: float  # expected impact magnitude (ranking)

    @property
    def guardrails_pass(self) -> bool:
        return self.content.guardrails_pass


Proposal = Evaluation


# --- formatting (the data signals' strings) -------------------------------------------------


def _pct(x: float, digits: int = 1) -> str:
    return f"{x * 100:.{digits}f} %"


def _money(x: float, currency: str) -> str:
    return f"{x:,.2f} {currency}"


def _signed_pct(x: float) -> str:
    return f"{'+' if x >= 0 else '−'}{abs(x) * 100:.0f} %"


def _check(check: str, passed: bool, detail: str) -> dict[str, Any]:
    return {"check": check, "passed": bool(passed), "detail": detail}


# --- shared guardrails --------------------------------------------------------------------------


def _common_checks(ctx: Context, entities: frozenset[str], own_fingerprint: str, own_id: str | None) -> list[dict]:
    """`data_fresh`, `cooldown_elapsed`, `no_conflicting_action` (§5.3's extra ids)."""
    out = []
    age = (ctx.as_of.date() - ctx.data_through).days
    out.append(
        _check(
            "data_fresh",
            age <= FRESH_DAYS,
            f"newest data is of {ctx.data_through.isoformat()}, {age} day(s) before {ctx.as_of.date().isoformat()} "
            f"(limit {FRESH_DAYS})",
        )
    )
    cooling = sorted(
        (name, ended)
        for name, ended in ctx.cooldowns.items()
        if name in entities and ctx.as_of - ended < timedelta(days=ctx.policy.cooldown_days)
    )
    if cooling:
        name, ended = cooling[0]
        detail = (
            f"a FloKit action on {name.split(':', 1)[1]} ended {ended.date().isoformat()}; "
            f"cooldown {ctx.policy.cooldown_days} days"
        )
    else:
        detail = f"no FloKit action on these entities ended in the last {ctx.policy.cooldown_days} days"
    out.append(_check("cooldown_elapsed", not cooling, detail))
    conflicts = sorted(
        a.id for a in ctx.open_actions if a.entities & entities and a.fingerprint != own_fingerprint and a.id != own_id
    )
    out.append(
        _check(
            "no_conflicting_action",
            not conflicts,
            f"open action {conflicts[0]} touches the same campaign or creative"
            if conflicts
            else "no other open action touches these campaigns or creatives",
        )
    )
    return out


def _learning_check(ctx: Context, campaigns: Iterable[RegistryCampaign]) -> dict[str, Any]:
    """`learning_phase_clear`: no edit of the campaigns in the last `cooldown_days` (Meta's learning week)."""
    recent = [
        c
        for c in campaigns
        if c.edited_at is not None and ctx.as_of - c.edited_at < timedelta(days=ctx.policy.cooldown_days)
    ]
    if recent:
        c = sorted(recent, key=lambda x: x.name)[0]
        assert c.edited_at is not None
        return _check(
            "learning_phase_clear",
            False,
            f"{c.name} was edited {c.edited_at.date().isoformat()}, within {ctx.policy.cooldown_days} days",
        )
    known = [c for c in campaigns if c.edited_at is not None]
    detail = (
        f"no edit in the last {ctx.policy.cooldown_days} days"
        if known
        else "the platform reports no edit time for these campaigns (none recorded)"
    )
    return _check("learning_phase_clear", True, detail)


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
    policy = ctx.policy
    decision = dec.budget_shift(
        s.std_roas, s.std_var, s.installs, t.std_roas, t.std_var, t.installs, policy.p_decision, h
    )
    bar = decision.bar
    ctw, mean, sd = float(decision.chance_to_win), float(decision.log_lift_mean), float(decision.log_lift_sd)
    risk, lift = float(decision.risk), float(decision.lift)

    # Size: min(leg cap of either budget, portfolio cap), floored to a whole currency unit.
    managed = sum(c.budget or 0.0 for c in ctx.registry.values() if c.currency == currency and c.status == "active")
    cap = min(policy.max_leg_change * reg_s.budget, policy.max_leg_change * reg_t.budget)
    cap = min(cap, policy.max_portfolio_change * managed)
    sized = float(math.floor(cap)) if amount is None else float(amount)
    floor_amount = MIN_SHIFT_SHARE_OF_TARGET * reg_t.budget
    leg_s, leg_t = sized / reg_s.budget, sized / reg_t.budget
    portfolio = sized / managed if managed > 0 else math.inf

    # minimum_cohort_size: the installs that could detect the claimed lift at 80 % power.
    claimed = max(lift, 0.0)
    needed = float(decision.needed)
    size_ok = bool(decision.sample_ok)
    spend_ok = all(x.spend >= SHIFT_MIN_SPEND_CPIS * (x.spend / x.installs) if x.installs else False for x in (s, t))
    label = f"ROAS {h}d"
    needed_txt = (
        "no lift is claimed" if not math.isfinite(needed) else f"a {_signed_pct(claimed)} gap needs ≥ {needed:.0f}"
    )
    checks = [
        _check(
            "minimum_cohort_size",
            size_ok and spend_ok,
            f"{s.installs} installs in {source} and {t.installs} in {target} with {h} complete days "
            f"({needed_txt}; floor {dec.SHIFT_MIN_INSTALLS})",
        ),
        _check(
            "statistical_confidence",
            ctw >= bar and risk <= dec.MAX_RISK,
            f"{_pct(ctw)} probability {target}'s {label} exceeds {source}'s "
            f"({_signed_pct(lift)}, log-lift {mean:.2f} ± {sd:.2f}, prior N(0, 0.3²); risk {risk:.3f}); "
            f"needs {_pct(bar)} and risk ≤ {dec.MAX_RISK}",
        ),
        _check(
            "spend_change_within_limit",
            sized > 0
            and leg_s <= policy.max_leg_change + 1e-9
            and leg_t <= policy.max_leg_change + 1e-9
            and portfolio <= policy.max_portfolio_change + 1e-9
            and sized >= floor_amount,
            f"moves {_money(sized, currency)}/day: {_pct(leg_s, 0)} of {source}, {_pct(leg_t, 0)} of {target}, "
            f"{_pct(portfolio, 0)} of managed spend (limits {_pct(policy.max_leg_change, 0)}/"
            f"{_pct(policy.max_leg_change, 0)}/{_pct(policy.max_portfolio_change, 0)}; "
            f"at least {_money(floor_amount, currency)})",
        ),
    ]
    subject = (source, target)
    fp = fingerprint(ctx.workspace_id, "budget_shift", subject, "increase_target")
    entities = frozenset({entity("campaign", source), entity("campaign", target)})
    checks += _common_checks(ctx, entities, fp, own_id)
    checks.append(_learning_check(ctx, (reg_s, reg_t)))
    impact = sized * (t.roas - s.roas) * IMPACT_HAIRCUT / managed if managed > 0 else 0.0
    parameters = {"from_campaign": source, "to_campaign": target, "amount_per_day": sized, "currency": currency}
    content = ActionContent(
        title=f"Shift {_money(sized, currency)}/day from {source} to {target}",
        rationale=(
            f"{target} returns {t.roas:.2f} of its spend by day {h} against {source}'s {s.roas:.2f} "
            f"(cohorts {(newest - timedelta(days=COMPARE_WINDOW_DAYS - 1)).isoformat()}..{newest.isoformat()}, "
            f"country-standardised {t.std_roas:.2f} vs {s.std_roas:.2f}); moving budget toward the faster payback."
        ),
        expected_impact={"metric": f"roas_{h}d", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"{label}, {source}", "value": f"{s.roas:.2f}"},
            {"label": f"{label}, {target}", "value": f"{t.roas:.2f}"},
            {"label": f"{label} country-standardised, {source}", "value": f"{s.std_roas:.2f}"},
            {"label": f"{label} country-standardised, {target}", "value": f"{t.std_roas:.2f}"},
            {"label": f"Installs, {source}", "value": str(s.installs)},
            {"label": f"Installs, {target}", "value": str(t.installs)},
            {"label": f"Spend, {source}", "value": _money(s.spend, currency)},
            {"label": f"Spend, {target}", "value": _money(t.spend, currency)},
            {"label": f"Daily budget, {source}", "value": _money(reg_s.budget, currency)},
            {"label": f"Daily budget, {target}", "value": _money(reg_t.budget, currency)},
            {"label": "Probability the shift pays back faster", "value": _pct(ctw)},
        ],
        guardrail_checks=checks,
    )
    evidence = {
        "engine_version": ENGINE_VERSION,
        "data_through": ctx.data_through.isoformat(),
        "as_of": ctx.as_of.isoformat(),
        "horizon_days": h,
        "cohorts": [(newest - timedelta(days=COMPARE_WINDOW_DAYS - 1)).isoformat(), newest.isoformat()],
        "country_weights": weights,
        "source": {
            "installs": s.installs,
            "spend": s.spend,
            "net": s.net,
            "std_roas": s.std_roas,
            "std_var": s.std_var,
        },
        "target": {
            "installs": t.installs,
            "spend": t.spend,
            "net": t.net,
            "std_roas": t.std_roas,
            "std_var": t.std_var,
        },
        "posterior": {"chance_to_win": ctw, "log_lift_mean": mean, "log_lift_sd": sd, "risk": risk, "lift": lift},
        "thresholds": {
            "bar": bar,
            "min_lift": dec.SHIFT_MIN_LIFT,
            "max_risk": dec.MAX_RISK,
            "min_installs": dec.SHIFT_MIN_INSTALLS,
            "needed_installs": needed if math.isfinite(needed) else None,
        },
        "budgets": {"source": reg_s.budget, "target": reg_t.budget, "managed": managed, "currency": currency},
        "policy": policy.to_dict(),
    }
    return Evaluation(
        action_type="budget_shift",
        parameters=parameters,
        fingerprint=fp,
        entities=entities,
        content=content,
        rollback_rules=shift_rollback_rules(target, 14, policy.observation_days),
        evidence=_clean(evidence),
        signal=bool(decision.signal) and sized > 0,
        confidence=ctw if math.isfinite(ctw) else 0.0,
        sample=min(s.installs, t.installs),
        score=impact,
    )


# --- creative pause -------------------------------------------------------------------------------


def _matured(signals: pl.DataFrame, *, paid_only: bool = True) -> pl.DataFrame:
    """Cohort rows old enough for their trials to have converted (of paid campaigns: creatives)."""
    rows = signals.filter(pl.col("complete_days") >= TRIAL_MATURITY_DAYS)
    return rows.filter(pl.col("campaign") != ORGANIC) if paid_only else rows


def pause_rollback_rules(campaign: str, observe: int) -> tuple[RollbackRule, ...]:
    """§5.2's rollback rules of a creative pause, on its campaign K."""
    common: dict[str, Any] = {
        "scope_entity": "campaign",
        "scope_name": campaign,
        "baseline_window_days": 14,
        "window_max_days": observe,
    }
    return (
        RollbackRule(
            id="rb1", metric="installs_per_day", comparator="lt", threshold_kind="relative_to_baseline",
            threshold_value=0.75, min_sample_unit="installs", min_sample_value=200, grace_hours=48,
            test="consecutive", consecutive=2, on_breach="rollback", **common,
        ),
        RollbackRule(
            id="rb2", metric="cpi", comparator="gt", threshold_kind="relative_to_baseline", threshold_value=1.25,
            min_sample_unit="installs", min_sample_value=200, grace_hours=48, test="confidence_sequence",
            alpha=st.SEQUENTIAL_ALPHA, n_star=1500, on_breach="rollback", **common,
        ),
        RollbackRule(
            id="rb3", metric="trial_rate", comparator="lt", threshold_kind="relative_to_baseline",
            threshold_value=0.85, min_sample_unit="installs", min_sample_value=200, grace_hours=48,
            test="confidence_sequence", alpha=st.SEQUENTIAL_ALPHA, n_star=1500, on_breach="rollback", **common,
        ),
    )  # fmt: skip


def evaluate_creative_pause(
    signals: pl.DataFrame, ctx: Context, creative: str, campaign: str, own_id: str | None = None
) -> Evaluation | None:
    """A pause of `creative` in `campaign` evaluated (§5.2): None when the registry has no such active
    ad (nothing to pause) or the campaign has no matured trials."""
    reg = ctx.registry.get(campaign)
    if reg is None or reg.creatives.get(creative) != "active":
        return None
    rows = (
        _matured(signals)
        .filter(pl.col("campaign") == campaign)
        .group_by("creative")
        .agg(pl.col("trials", "trial_conversions", "installs").sum(), pl.col("spend").sum())
        .sort("creative")
    )
    per = {r["creative"]: r for r in rows.iter_rows(named=True)}
    if creative not in per:
        return None
    trials = np.array([r["trials"] for r in per.values()], dtype=float)
    wins = np.array([r["trial_conversions"] for r in per.values()], dtype=float)
    if trials.sum() <= 0:
        return None
    spends = np.array([r["spend"] or 0.0 for r in per.values()], dtype=float)
    i = list(per).index(creative)
    c = per[creative]
    n_c, s_c = int(c["trials"]), int(c["trial_conversions"])
    n_r = int(trials.sum()) - n_c
    s_r = int(wins.sum()) - s_c
    spend_all = float(spends.sum())
    spend_c = float(spends[i])
    active = sorted(k for k, v in reg.creatives.items() if v == "active")
    not_last = len(active) > 1
    policy = ctx.policy
    # The rule decides every creative of the campaign at once; this evaluation is one of them.
    decision = dec.creative_pause(wins, trials, spends, policy.p_decision, others_active=not_last)
    prior = st.EmpiricalBayesPrior(rate=float(decision.prior_rate), kappa=float(decision.prior_kappa))
    p_worse, share = float(decision.p_worse[i]), float(decision.spend_share[i])
    needed, signal = float(decision.needed[i]), bool(decision.signal[i])
    rate_c = s_c / n_c if n_c else math.nan
    rate_r = s_r / n_r if n_r else math.nan
    cost_per_paid = spend_all / float(wins.sum()) if wins.sum() > 0 else math.inf
    checks = [
        _check(
            "minimum_cohort_size",
            bool(decision.sample_ok[i]),
            f"{n_c} matured trials in {creative} and {n_r} in the rest of {campaign} "
            f"(a {_pct(float(decision.claimed_gap[i]), 0)} gap at a {_pct(rate_r if n_r else 0.0, 0)} base rate "
            f"needs ≥ {needed:.0f}; floors {dec.PAUSE_MIN_TRIALS}/{dec.PAUSE_MIN_REST_TRIALS}); spend "
            f"{spend_c:,.2f}, {_pct(share, 0)} of the campaign (needs ≥ {dec.PAUSE_MIN_PAID_COSTS:g} × its cost "
            f"per paid conversion {cost_per_paid:,.2f} and ≥ {_pct(dec.PAUSE_MIN_SPEND_SHARE, 0)})",
        ),
        _check(
            "statistical_confidence",
            p_worse >= policy.p_decision,
            f"{_pct(p_worse)} probability {creative} converts trials at least {_pct(dec.PAUSE_MARGIN, 0)} worse "
            f"than the rest of {campaign} ({_pct(rate_c)} vs {_pct(rate_r)}; empirical-Bayes prior Beta centred "
            f"on {_pct(prior.rate)}, strength {prior.kappa:.0f}); needs {_pct(policy.p_decision)}",
        ),
        _check(
            "spend_change_within_limit",
            not_last,
            f"pausing raises no spend; {len(active) - 1} other active ad(s) keep {campaign} delivering"
            if not_last
            else f"{creative} is the last active ad of {campaign}",
        ),
    ]
    fp = fingerprint(ctx.workspace_id, "creative_pause", (campaign, creative), "pause")
    entities = frozenset({entity("campaign", campaign), entity("creative", f"{campaign}/{creative}")})
    checks += _common_checks(ctx, entities, fp, own_id)
    checks.append(_learning_check(ctx, (reg,)))
    total_trials = float(trials.sum())
    impact = (n_c / total_trials) * (rate_r - rate_c) if total_trials and n_r and n_c else 0.0
    content = ActionContent(
        title=f"Pause creative {creative} in {campaign}",
        rationale=(
            f"{creative} converts matured trials to paid at {_pct(rate_c)} against {_pct(rate_r)} for the rest "
            f"of {campaign}, while taking {_pct(share, 0)} of its spend."
        ),
        expected_impact={"metric": "trial_conversion_rate", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"Trial → paid, {creative}", "value": _pct(rate_c)},
            {"label": f"Trial → paid, rest of {campaign}", "value": _pct(rate_r)},
            {"label": f"Matured trials, {creative}", "value": str(n_c)},
            {"label": f"Matured trials, rest of {campaign}", "value": str(n_r)},
            {"label": f"Spend share in {campaign}", "value": _pct(share, 0)},
            {"label": f"Probability it converts ≥ {_pct(dec.PAUSE_MARGIN, 0)} worse", "value": _pct(p_worse)},
        ],
        guardrail_checks=checks,
    )
    evidence = {
        "engine_version": ENGINE_VERSION,
        "data_through": ctx.data_through.isoformat(),
        "as_of": ctx.as_of.isoformat(),
        "maturity_days": TRIAL_MATURITY_DAYS,
        "creatives": {
            k: {"trials": r["trials"], "trial_conversions": r["trial_conversions"], "spend": r["spend"]}
            for k, r in per.items()
        },
        "prior": {"rate": prior.rate, "kappa": prior.kappa},
        "candidate": {"trials": n_c, "conversions": s_c, "spend": spend_c},
        "rest": {"trials": n_r, "conversions": s_r, "spend": spend_all - spend_c},
        "p_worse": p_worse,
        "thresholds": {
            "margin": dec.PAUSE_MARGIN,
            "bar": policy.p_decision,
            "min_trials": dec.PAUSE_MIN_TRIALS,
            "min_rest_trials": dec.PAUSE_MIN_REST_TRIALS,
            "needed_trials": needed if math.isfinite(needed) else None,
        },
        "policy": policy.to_dict(),
    }
    return Evaluation(
        action_type="creative_pause",
        parameters={"creative": creative, "campaign": campaign},
        fingerprint=fp,
        entities=entities,
        content=content,
        rollback_rules=pause_rollback_rules(campaign, policy.observation_days),
        evidence=_clean(evidence),
        signal=signal,
        confidence=p_worse,
        sample=n_c,
        score=impact,
    )


# --- offer test -------------------------------------------------------------------------------------


def evaluate_offer_test(
    signals: pl.DataFrame,
    ctx: Context,
    paywall: str,
    country: str,
    control: str,
    treatment: str,
    own_id: str | None = None,
) -> Evaluation | None:
    """An offer test in (paywall, country): `treatment` vs `control` (§5.2 offer_test, design only).

    The signal: the treatment offer converts the paywall's users in this country to paid at ≥ 1.25×
    its own rate in the other countries (P ≥ p_decision, beta posteriors on paid / paywall users),
    i.e. this country answers the offer differently and a randomised test can say whether to lead
    with it. Matured cohorts only (a trial's conversion must have had time to land).
    """
    rows = _matured(signals, paid_only=False).filter((pl.col("paywall") == paywall) & (pl.col("paywall") != NONE_LABEL))
    if rows.is_empty():
        return None
    agg = rows.group_by("country", "offer").agg(
        # `subscriptions` counts every new paid subscription, trial conversions included
        # (NEW_SUBSCRIPTIONS); adding `trial_conversions` again counted each converted trial twice.
        pl.col("paywall_users").sum(),
        pl.col("subscriptions").sum().alias("paid"),
    )
    cell = {(r["country"], r["offer"]): r for r in agg.iter_rows(named=True)}
    if (country, treatment) not in cell or (country, control) not in cell:
        return None
    here = cell[(country, treatment)]
    others = [r for (g, o), r in cell.items() if o == treatment and g != country]
    n_here, s_here = int(here["paywall_users"]), min(int(here["paid"]), int(here["paywall_users"]))
    n_else = sum(int(r["paywall_users"]) for r in others)
    s_else = min(sum(int(r["paid"]) for r in others), n_else)
    if n_here < 1 or n_else < 1:
        return None
    rate_here, rate_else = s_here / n_here, s_else / n_else
    ctrl = cell[(country, control)]
    policy = ctx.policy
    decision = dec.offer_test(s_here, n_here, s_else, n_else, policy.p_decision)
    p_up, needed = float(decision.p_up), float(decision.needed)
    size_ok, signal = bool(decision.sample_ok), bool(decision.signal)
    # Design (§5.2): 50/50, primary metric ARPU_14; n per arm for a 10 % relative lift on paid conversion.
    n_arm = float(st.sample_size_proportion(rate_here, 0.10)) if 0 < rate_here < 1 else math.inf
    first_cohort = rows.get_column("cohort_date").min()
    assert isinstance(first_cohort, date)
    days = max(1, (ctx.data_through - first_cohort).days + 1)
    daily = (n_here + int(ctrl["paywall_users"])) / days
    duration = max(28, math.ceil(2 * n_arm / daily)) if daily > 0 and math.isfinite(n_arm) else None
    checks = [
        _check(
            "minimum_cohort_size",
            size_ok,
            f"{n_here} paywall users on {treatment} in {country} (a +25 % gap at a {_pct(rate_else)} base rate needs "
            f"≥ {needed:.0f}; floor {dec.OFFER_MIN_PAYWALL_USERS})",
        ),
        _check(
            "statistical_confidence",
            p_up >= policy.p_decision,
            f"{_pct(p_up)} probability {treatment} converts ≥ 25 % better in {country} than elsewhere "
            f"({_pct(rate_here)} vs {_pct(rate_else)}); needs {_pct(policy.p_decision)}",
        ),
        _check("spend_change_within_limit", True, "an offer test changes no ad spend"),
    ]
    fp = fingerprint(ctx.workspace_id, "offer_test", (paywall, country, control, treatment), "test")
    entities = frozenset({entity("paywall", f"{paywall}/{country}")})
    checks += _common_checks(ctx, entities, fp, own_id)
    # Expected impact: the paid-conversion gap over the control in this cell (what leading with it could win).
    rate_ctrl = min(int(ctrl["paid"]), int(ctrl["paywall_users"])) / max(int(ctrl["paywall_users"]), 1)
    impact = max(rate_here - rate_ctrl, 0.0)
    content = ActionContent(
        title=f"Test {treatment} against {control} on {paywall} in {country}",
        rationale=(
            f"On {paywall} in {country}, {treatment} converts {_pct(rate_here)} of its users to paid against "
            f"{_pct(rate_else)} in the other countries; a 50/50 test against {control} says whether to lead with it. "
            "Design only: approving launches it."
        ),
        expected_impact={"metric": "paid_conversion_rate", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"Paid conversion, {treatment} in {country}", "value": _pct(rate_here)},
            {"label": f"Paid conversion, {treatment} elsewhere", "value": _pct(rate_else)},
            {"label": f"Paywall users, {treatment} in {country}", "value": str(n_here)},
            {"label": f"Paywall users, {control} in {country}", "value": str(int(ctrl["paywall_users"]))},
            {"label": "Users per arm for a 10 % lift", "value": f"{n_arm:.0f}" if math.isfinite(n_arm) else "n/a"},
            {"label": "Planned duration", "value": f"{duration} days" if duration else "n/a"},
        ],
        guardrail_checks=checks,
    )
    evidence = {
        "engine_version": ENGINE_VERSION,
        "data_through": ctx.data_through.isoformat(),
        "as_of": ctx.as_of.isoformat(),
        "here": {"users": n_here, "paid": s_here},
        "elsewhere": {"users": n_else, "paid": s_else},
        "control": {"users": int(ctrl["paywall_users"]), "paid": int(ctrl["paid"])},
        "p_up": p_up,
        "design": {"split": [0.5, 0.5], "primary_metric": "arpu_d14", "n_per_arm": n_arm, "duration_days": duration},
        "policy": policy.to_dict(),
    }
    return Evaluation(
        action_type="offer_test",
        parameters={"paywall_id": paywall, "country": country, "control_offer": control, "treatment_offer": treatment},
        fingerprint=fp,
        entities=entities,
        content=content,
        rollback_rules=(),
        evidence=_clean(evidence),
        signal=signal,
        confidence=p_up,
        sample=n_here,
        score=impact,
    )


# --- the generator ------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe evidence: NaN and infinities become None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.floating):
        return _clean(float(value))
    if isinstance(value, np.integer):
        return int(value)
    return value


def candidates(signals: pl.DataFrame, ctx: Context) -> list[Evaluation]:
    """Every subject the data can speak about, evaluated (signal or not)."""
    out: list[Evaluation] = []
    paid = sorted(c for c in signals.get_column("campaign").unique().to_list() if c not in (ORGANIC, NONE_LABEL, None))
    for source in paid:
        for target in paid:
            if source != target:
                e = evaluate_budget_shift(signals, ctx, source, target)
                if e is not None:
                    out.append(e)
    pairs = _matured(signals).select("campaign", "creative").unique().sort("campaign", "creative")
    for campaign, creative in pairs.iter_rows():
        if creative in (NONE_LABEL, None):
            continue
        e = evaluate_creative_pause(signals, ctx, creative, campaign)
        if e is not None:
            out.append(e)
    out += _offer_candidates(signals, ctx)
    return out


def _offer_candidates(signals: pl.DataFrame, ctx: Context) -> list[Evaluation]:
    rows = _matured(signals, paid_only=False).filter(
        (pl.col("paywall") != NONE_LABEL) & (pl.col("offer") != NONE_LABEL) & pl.col("paywall").is_not_null()
    )
    if rows.is_empty():
        return []
    users = (
        rows.group_by("paywall", "country", "offer")
        .agg(pl.col("paywall_users").sum())
        .sort(["paywall", "country", "paywall_users", "offer"], descending=[False, False, True, False])
    )
    out = []
    for (paywall, country), group in users.group_by(["paywall", "country"], maintain_order=True):
        offers = group.get_column("offer").to_list()
        if len(offers) < 2:
            continue
        for treatment in offers:
            control = next(o for o in offers if o != treatment)  # the most chosen other offer
            e = evaluate_offer_test(signals, ctx, str(paywall), str(country), control, treatment)
            if e is not None:
                out.append(e)
    return out


def suppressed(e: Evaluation, ctx: Context) -> Rejection | None:
    """A human's rejection within `suppress_after_reject_days` that still holds: unless the sample
    doubled and the confidence is ≥ 0.99 (§5.4)."""
    window = timedelta(days=ctx.policy.suppress_after_reject_days)
    for r in ctx.rejections:
        recent = r.fingerprint == e.fingerprint and ctx.as_of - r.rejected_at < window
        if recent and not (e.sample >= 2 * r.sample and e.confidence >= 0.99):
            return r
    return None


def propose(signals: pl.DataFrame, ctx: Context) -> list[Evaluation]:
    """The new proposals of a refresh, ranked by expected impact (ties by fingerprint), at most
    `max_new_actions_per_refresh`, each entity in at most one open action (§5.4's entity lock).

    Dropped: subjects without signal, those an open action already holds (the engine re-evaluates
    those), those a human rejected recently (unless the evidence got much stronger), and those whose
    campaigns or creatives an open action or a better-ranked proposal of this refresh already touches.
    """
    held = {a.fingerprint for a in ctx.open_actions if a.fingerprint}
    locked: set[str] = set()
    for a in ctx.open_actions:
        locked |= a.entities
    ranked = sorted(
        (e for e in candidates(signals, ctx) if e.signal and e.fingerprint not in held and suppressed(e, ctx) is None),
        key=lambda e: (-e.score, e.fingerprint),
    )
    out: list[Evaluation] = []
    for e in ranked:
        if len(out) >= ctx.policy.max_new_actions_per_refresh:
            break
        if e.entities & locked:
            continue
        out.append(e)
        locked |= e.entities
    return out


# --- a named subject (the engine's re-evaluation, POST /v1/actions) ------------------------------


def entities_of(action_type: str, parameters: dict[str, Any] | None) -> frozenset[str]:
    """The campaigns / creatives / paywall cells an action's parameters touch (the entity lock)."""
    p = parameters or {}
    if action_type == "budget_shift" and "from_campaign" in p:
        return frozenset({entity("campaign", p["from_campaign"]), entity("campaign", p["to_campaign"])})
    if action_type == "creative_pause" and "creative" in p:
        return frozenset({entity("campaign", p["campaign"]), entity("creative", f"{p['campaign']}/{p['creative']}")})
    if action_type == "offer_test" and "paywall_id" in p:
        return frozenset({entity("paywall", f"{p['paywall_id']}/{p['country']}")})
    return frozenset()


def evaluate(
    signals: pl.DataFrame, ctx: Context, action_type: str, parameters: dict[str, Any], own_id: str | None = None
) -> Evaluation | None:
    """The subject of `parameters` evaluated by the generator of its type (engine and API alike)."""
    if signals.is_empty():
        return None
    if action_type == "budget_shift":
        return evaluate_budget_shift(
            signals, ctx, parameters["from_campaign"], parameters["to_campaign"], parameters["amount_per_day"], own_id
        )
    if action_type == "creative_pause":
        return evaluate_creative_pause(signals, ctx, parameters["creative"], parameters["campaign"], own_id)
    return evaluate_offer_test(
        signals,
        ctx,
        parameters["paywall_id"],
        parameters["country"],
        parameters["control_offer"],
        parameters["treatment_offer"],
        own_id,
    )


# --- what an evaluation row keeps ---------------------------------------------------------------


def data_as_of(day: date) -> datetime:
    """The evaluations' `data_as_of`: the start (UTC) of the newest day with events."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def evaluation_detail(e: Evaluation, summary: str) -> dict[str, Any]:
    """What an evaluation row keeps: the summary line, the guardrail results and data signals as
    shown, the confidence and sample (hysteresis and suppression read them), and the evidence."""
    return {
        "summary": summary,
        "confidence": e.confidence,
        "sample": e.sample,
        "signal": e.signal,
        "score": e.score,
        "parameters": e.parameters,
        "guardrail_checks": e.content.guardrail_checks,
        "data_signals": e.content.data_signals,
        "evidence": e.evidence,
    }


def confidence_line(e: Evaluation) -> str:
    failed = [c["check"] for c in e.content.guardrail_checks if not c["passed"]]
    checks = f"guardrails failing: {', '.join(failed)}" if failed else "all guardrails pass"
    return f"confidence {e.confidence * 100:.1f} %, {checks}"
