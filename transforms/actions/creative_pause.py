# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF001, RUF003
"""The creative-pause rule family (design note §5.2): pause a creative whose matured trials convert
to paid well below the rest of its campaign's. Pure; `proposals` runs it with the other families."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from transforms.actions import ActionContent
from transforms.actions import decisions as dec
from transforms.actions import statistics as st
from transforms.actions.evidence import (
    ENGINE_VERSION,
    TRIAL_MATURITY_DAYS,
    Context,
    Evaluation,
    RegistryCampaign,
    common_checks,
    entity,
    fingerprint,
    guardrail,
    json_safe,
    learning_check,
    matured,
    pct,
)
from transforms.actions.rules import RollbackRule

# --- creative pause -------------------------------------------------------------------------------


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
    m = _measure(signals, ctx, creative, campaign, reg)
    if m is None:
        return None
    policy = ctx.policy
    checks = [
        guardrail(
            "minimum_cohort_size",
            m.sample_ok,
            f"{m.n_c} matured trials in {creative} and {m.n_r} in the rest of {campaign} "
            f"(a {pct(m.claimed_gap, 0)} gap at a {pct(m.rate_r if m.n_r else 0.0, 0)} base rate "
            f"needs ≥ {m.needed:.0f}; floors {dec.PAUSE_MIN_TRIALS}/{dec.PAUSE_MIN_REST_TRIALS}); spend "
            f"{m.spend_c:,.2f}, {pct(m.share, 0)} of the campaign (needs ≥ {dec.PAUSE_MIN_PAID_COSTS:g} × its cost "
            f"per paid conversion {m.cost_per_paid:,.2f} and ≥ {pct(dec.PAUSE_MIN_SPEND_SHARE, 0)})",
        ),
        guardrail(
            "statistical_confidence",
            m.p_worse >= policy.p_decision,
            f"{pct(m.p_worse)} probability {creative} converts trials at least {pct(dec.PAUSE_MARGIN, 0)} worse "
            f"than the rest of {campaign} ({pct(m.rate_c)} vs {pct(m.rate_r)}; empirical-Bayes prior Beta centred "
            f"on {pct(m.prior.rate)}, strength {m.prior.kappa:.0f}); needs {pct(policy.p_decision)}",
        ),
        guardrail(
            "spend_change_within_limit",
            m.not_last,
            f"pausing raises no spend; {len(m.active) - 1} other active ad(s) keep {campaign} delivering"
            if m.not_last
            else f"{creative} is the last active ad of {campaign}",
        ),
    ]
    fp = fingerprint(ctx.workspace_id, "creative_pause", (campaign, creative), "pause")
    entities = frozenset({entity("campaign", campaign), entity("creative", f"{campaign}/{creative}")})
    checks += common_checks(ctx, entities, fp, own_id)
    checks.append(learning_check(ctx, (reg,)))
    impact = (m.n_c / m.total_trials) * (m.rate_r - m.rate_c) if m.total_trials and m.n_r and m.n_c else 0.0
    content = ActionContent(
        title=f"Pause creative {creative} in {campaign}",
        rationale=(
            f"{creative} converts matured trials to paid at {pct(m.rate_c)} against {pct(m.rate_r)} for the rest "
            f"of {campaign}, while taking {pct(m.share, 0)} of its spend."
        ),
        expected_impact={"metric": "trial_conversion_rate", "direction": "increase", "magnitude": round(impact, 6)},
        data_signals=[
            {"label": f"Trial → paid, {creative}", "value": pct(m.rate_c)},
            {"label": f"Trial → paid, rest of {campaign}", "value": pct(m.rate_r)},
            {"label": f"Matured trials, {creative}", "value": str(m.n_c)},
            {"label": f"Matured trials, rest of {campaign}", "value": str(m.n_r)},
            {"label": f"Spend share in {campaign}", "value": pct(m.share, 0)},
            {"label": f"Probability it converts ≥ {pct(dec.PAUSE_MARGIN, 0)} worse", "value": pct(m.p_worse)},
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
            for k, r in m.per.items()
        },
        "prior": {"rate": m.prior.rate, "kappa": m.prior.kappa},
        "candidate": {"trials": m.n_c, "conversions": m.s_c, "spend": m.spend_c},
        "rest": {"trials": m.n_r, "conversions": m.s_r, "spend": m.spend_all - m.spend_c},
        "p_worse": m.p_worse,
        "thresholds": {
            "margin": dec.PAUSE_MARGIN,
            "bar": policy.p_decision,
            "min_trials": dec.PAUSE_MIN_TRIALS,
            "min_rest_trials": dec.PAUSE_MIN_REST_TRIALS,
            "needed_trials": m.needed if math.isfinite(m.needed) else None,
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
        evidence=json_safe(evidence),
        signal=m.signal,
        confidence=m.p_worse,
        sample=m.n_c,
        score=impact,
    )


@dataclass(frozen=True)
class _Campaign:
    """The numbers one creative pause stands on: the creative's matured trials and conversions
    against the rest of its campaign's, its spend share, and the decision on them."""

    per: dict[str, dict[str, Any]]
    n_c: int
    s_c: int
    n_r: int
    s_r: int
    spend_all: float
    spend_c: float
    active: list[str]
    not_last: bool
    prior: st.EmpiricalBayesPrior
    p_worse: float
    share: float
    needed: float
    signal: bool
    sample_ok: bool
    claimed_gap: float
    rate_c: float
    rate_r: float
    cost_per_paid: float
    total_trials: float


def _measure(
    signals: pl.DataFrame, ctx: Context, creative: str, campaign: str, reg: RegistryCampaign
) -> _Campaign | None:
    """The campaign's matured counts per creative and the rule's decision; None without trials."""
    rows = (
        matured(signals)
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
    # The rule decides every creative of the campaign at once; this evaluation is one of them.
    decision = dec.creative_pause(wins, trials, spends, ctx.policy.p_decision, others_active=not_last)
    prior = st.EmpiricalBayesPrior(rate=float(decision.prior_rate), kappa=float(decision.prior_kappa))
    p_worse, share = float(decision.p_worse[i]), float(decision.spend_share[i])
    needed, signal = float(decision.needed[i]), bool(decision.signal[i])
    rate_c = s_c / n_c if n_c else math.nan
    rate_r = s_r / n_r if n_r else math.nan
    cost_per_paid = spend_all / float(wins.sum()) if wins.sum() > 0 else math.inf
    return _Campaign(
        per,
        n_c,
        s_c,
        n_r,
        s_r,
        spend_all,
        spend_c,
        active,
        not_last,
        prior,
        p_worse,
        share,
        needed,
        signal,
        bool(decision.sample_ok[i]),
        float(decision.claimed_gap[i]),
        rate_c,
        rate_r,
        cost_per_paid,
        float(trials.sum()),
    )
