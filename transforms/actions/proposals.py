# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF002, RUF003
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

from datetime import timedelta
from typing import Any

import polars as pl

from transforms.actions.budget_shift import evaluate_budget_shift, horizon, shift_rollback_rules
from transforms.actions.creative_pause import evaluate_creative_pause, pause_rollback_rules
from transforms.actions.evidence import (
    ENGINE_VERSION,
    SIGNAL_LOOKBACK_DAYS,
    Context,
    Evaluation,
    OpenAction,
    Proposal,
    RegistryCampaign,
    Rejection,
    confidence_line,
    data_as_of,
    entity,
    evaluation_detail,
    fingerprint,
    matured,
)
from transforms.actions.offer_test import evaluate_offer_test
from transforms.reports.schemas import NONE_LABEL, ORGANIC

# --- the generator ------------------------------------------------------------------------------------


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
    pairs = matured(signals).select("campaign", "creative").unique().sort("campaign", "creative")
    for campaign, creative in pairs.iter_rows():
        if creative in (NONE_LABEL, None):
            continue
        e = evaluate_creative_pause(signals, ctx, creative, campaign)
        if e is not None:
            out.append(e)
    out += _offer_candidates(signals, ctx)
    return out


def _offer_candidates(signals: pl.DataFrame, ctx: Context) -> list[Evaluation]:
    rows = matured(signals, paid_only=False).filter(
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


__all__ = [
    "ENGINE_VERSION",
    "SIGNAL_LOOKBACK_DAYS",
    "Context",
    "Evaluation",
    "OpenAction",
    "Proposal",
    "RegistryCampaign",
    "Rejection",
    "candidates",
    "confidence_line",
    "data_as_of",
    "entities_of",
    "entity",
    "evaluate",
    "evaluate_budget_shift",
    "evaluate_creative_pause",
    "evaluate_offer_test",
    "evaluation_detail",
    "fingerprint",
    "horizon",
    "pause_rollback_rules",
    "propose",
    "shift_rollback_rules",
    "suppressed",
]
