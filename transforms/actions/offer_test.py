# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
"""The offer-test rule family (design note §5.2, design only): a two-arm test of a paywall offer in a
country that answers it differently from the others. Pure; `proposals` runs it with the other
families."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date
from typing import Any

import polars as pl

from transforms.actions import ActionContent
from transforms.actions import decisions as dec
from transforms.actions import statistics as st
from transforms.actions.evidence import (
    ENGINE_VERSION,
    Context,
    Evaluation,
    common_checks,
    entity,
    fingerprint,
    guardrail,
    json_safe,
    matured,
    pct,
)
from transforms.reports.schemas import NONE_LABEL

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
    m = _measure(signals, ctx, paywall, country, control, treatment)
    if m is None:
        return None
    policy = ctx.policy
    checks = [
        guardrail(
            "minimum_cohort_size",
            m.size_ok,
            f"{m.n_here} paywall users on {treatment} in {country} (a +25 % gap at a {pct(m.rate_else)} base rate "
            f"needs ≥ {m.needed:.0f}; floor {dec.OFFER_MIN_PAYWALL_USERS})",
        ),
        guardrail(
            "statistical_confidence",
            m.p_up >= policy.p_decision,
            f"{pct(m.p_up)} probability {treatment} converts ≥ 25 % better in {country} than elsewhere "
            f"({pct(m.rate_here)} vs {pct(m.rate_else)}); needs {pct(policy.p_decision)}",
        ),
        guardrail("spend_change_within_limit", True, "an offer test changes no ad spend"),
    ]
    fp = fingerprint(ctx.workspace_id, "offer_test", (paywall, country, control, treatment), "test")
    entities = frozenset({entity("paywall", f"{paywall}/{country}")})
    checks += common_checks(ctx, entities, fp, own_id)
    # Expected impact: the paid-conversion gap over the control in this cell (what leading with it could win).
    rate_ctrl = min(int(m.ctrl["paid"]), int(m.ctrl["paywall_users"])) / max(int(m.ctrl["paywall_users"]), 1)
    impact = max(m.rate_here - rate_ctrl, 0.0)
    content = ActionContent(
        title=f"Test {treatment} against {control} on {paywall} in {country}",
        rationale=(
            f"On {paywall} in {country}, {treatment} converts {pct(m.rate_here)} of its users to paid against "
            f"{pct(m.rate_else)} in the other countries; a 50/50 test against {control} says whether to lead with it. "
            "Design only: approving launches it."
        ),
        expected_impact={"metric": "paid_conversion_rate", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"Paid conversion, {treatment} in {country}", "value": pct(m.rate_here)},
            {"label": f"Paid conversion, {treatment} elsewhere", "value": pct(m.rate_else)},
            {"label": f"Paywall users, {treatment} in {country}", "value": str(m.n_here)},
            {"label": f"Paywall users, {control} in {country}", "value": str(int(m.ctrl["paywall_users"]))},
            {"label": "Users per arm for a 10 % lift", "value": f"{m.n_arm:.0f}" if math.isfinite(m.n_arm) else "n/a"},
            {"label": "Planned duration", "value": f"{m.duration} days" if m.duration else "n/a"},
        ],
        guardrail_checks=checks,
    )
    evidence = {
        "engine_version": ENGINE_VERSION,
        "data_through": ctx.data_through.isoformat(),
        "as_of": ctx.as_of.isoformat(),
        "here": {"users": m.n_here, "paid": m.s_here},
        "elsewhere": {"users": m.n_else, "paid": m.s_else},
        "control": {"users": int(m.ctrl["paywall_users"]), "paid": int(m.ctrl["paid"])},
        "p_up": m.p_up,
        "design": {
            "split": [0.5, 0.5],
            "primary_metric": "arpu_d14",
            "n_per_arm": m.n_arm,
            "duration_days": m.duration,
        },
        "policy": policy.to_dict(),
    }
    return Evaluation(
        action_type="offer_test",
        parameters={"paywall_id": paywall, "country": country, "control_offer": control, "treatment_offer": treatment},
        fingerprint=fp,
        entities=entities,
        content=content,
        rollback_rules=(),
        evidence=json_safe(evidence),
        signal=m.signal,
        confidence=m.p_up,
        sample=m.n_here,
        score=impact,
    )


@dataclass(frozen=True)
class _Cell:
    """The numbers one offer test stands on: the treatment's users and paid conversions in the
    country and elsewhere, the control's, the decision's probability, and the design's size."""

    n_here: int
    s_here: int
    n_else: int
    s_else: int
    rate_here: float
    rate_else: float
    ctrl: dict[str, Any]
    p_up: float
    needed: float
    size_ok: bool
    signal: bool
    n_arm: float
    duration: int | None


def _measure(
    signals: pl.DataFrame, ctx: Context, paywall: str, country: str, control: str, treatment: str
) -> _Cell | None:
    """The cell's matured counts and the decision on them; None when the data cannot speak."""
    rows = matured(signals, paid_only=False).filter((pl.col("paywall") == paywall) & (pl.col("paywall") != NONE_LABEL))
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
    decision = dec.offer_test(s_here, n_here, s_else, n_else, ctx.policy.p_decision)
    p_up, needed = float(decision.p_up), float(decision.needed)
    size_ok, signal = bool(decision.sample_ok), bool(decision.signal)
    # Design (§5.2): 50/50, primary metric ARPU_14; n per arm for a 10 % relative lift on paid conversion.
    n_arm = float(st.sample_size_proportion(rate_here, 0.10)) if 0 < rate_here < 1 else math.inf
    first_cohort = rows.get_column("cohort_date").min()
    assert isinstance(first_cohort, date)
    days = max(1, (ctx.data_through - first_cohort).days + 1)
    daily = (n_here + int(ctrl["paywall_users"])) / days
    duration = max(28, math.ceil(2 * n_arm / daily)) if daily > 0 and math.isfinite(n_arm) else None
    return _Cell(
        n_here, s_here, n_else, s_else, rate_here, rate_else, ctrl, p_up, needed, size_ok, signal, n_arm, duration
    )
