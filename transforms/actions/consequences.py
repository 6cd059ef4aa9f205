"""What approving or rolling back an action will do, in one sentence a person confirms.

The dashboard's confirmation dialogs state the consequence before the click (design note §5);
the sentences follow what the executor does (orchestration/actions/executor.py): an approved
budget shift or creative pause is applied on the ad account whose registry holds the campaign,
an offer test on FloKit's own paywall gateway, and a client's own proposal (no parameters) is
left for the operator to carry out.
"""

from __future__ import annotations

from typing import Any


def _on(accounts: list[str]) -> str:
    if not accounts:
        return "on the ad account whose registry holds the campaign (none is connected and synced yet)"
    if len(accounts) == 1:
        return f"on the ad account {accounts[0]}"
    return "on the ad accounts " + ", ".join(accounts)


def _amount(value: object) -> str:
    """Money as the action's title writes it (`1,250.00`), whatever JSON made of the number."""
    return f"{value:,.2f}" if isinstance(value, int | float) else str(value)


def campaigns_of(parameters: dict[str, Any] | None) -> set[str]:
    """The report campaigns an action's parameters name (where its ad account is looked up)."""
    if not parameters:
        return set()
    names = (parameters.get(k) for k in ("from_campaign", "to_campaign", "campaign"))
    return {n for n in names if isinstance(n, str)}


def accounts_of(parameters: dict[str, Any] | None, by_campaign: dict[str, set[str]]) -> list[str]:
    """The ad accounts an action's campaigns are on, sorted (`by_campaign`: campaign -> accounts)."""
    return sorted({name for campaign in campaigns_of(parameters) for name in by_campaign.get(campaign, set())})


def approve_consequence(action_type: str, parameters: dict[str, Any] | None, accounts: list[str]) -> str:
    """What happens after Approve."""
    if not parameters:
        return (
            "FloKit has nothing to apply for this action (it carries no parameters): approving records "
            "your decision, and you carry the change out yourself."
        )
    if action_type == "budget_shift":
        return (
            f"The executor moves {_amount(parameters.get('amount_per_day'))} {parameters.get('currency')} "
            "a day of budget "
            f"from campaign {parameters.get('from_campaign')} to campaign {parameters.get('to_campaign')} "
            f"{_on(accounts)}, after re-reading the live budgets."
        )
    if action_type == "creative_pause":
        return (
            f"The executor pauses creative {parameters.get('creative')} of campaign {parameters.get('campaign')} "
            f"{_on(accounts)}."
        )
    return (
        f"The executor publishes an offer test on paywall {parameters.get('paywall_id')} for users in "
        f"{parameters.get('country')}: {parameters.get('control_offer')} against {parameters.get('treatment_offer')}, "
        "served by FloKit's paywall gateway."
    )


def rollback_consequence(action_type: str, parameters: dict[str, Any] | None, accounts: list[str]) -> str:
    """What Roll back reverts (only budget shifts and creative pauses can be rolled back)."""
    if action_type == "budget_shift" and parameters:
        return (
            f"The executor writes back the daily budgets campaigns {parameters.get('from_campaign')} and "
            f"{parameters.get('to_campaign')} had before {_on(accounts)}; a budget someone changed since "
            "is left as they set it."
        )
    if action_type == "creative_pause" and parameters:
        return (
            f"The executor sets creative {parameters.get('creative')} of campaign {parameters.get('campaign')} "
            f"back to its status before the pause {_on(accounts)}; a status someone changed since is left as is."
        )
    return "The action is marked rolled back; FloKit applied nothing for it, so nothing is written on a platform."


# The engine's magnitudes are absolute changes in the metric's own unit (transforms/actions/
# proposals.py): ROAS is revenue per unit of spend, so its change reads as a plain number; rates are
# fractions, so their change reads in percentage points (a 0.012 rise of a 30 % rate is 1.2 points,
# not 1.2 %). The sentence names the population the engine computed it over.
_IMPACT_SUBJECTS = {
    "trial_conversion_rate": ("the campaign's trial-to-paid conversion rate", ""),
    "paid_conversion_rate": ("paid conversion on the paywall in this country", " over the control offer"),
}


def impact_sentence(expected_impact: dict[str, Any]) -> str:
    """`expected_impact` as a person reads it, in the metric's own unit."""
    metric = str(expected_impact.get("metric", ""))
    direction = str(expected_impact.get("direction", ""))
    magnitude = expected_impact.get("magnitude")
    if metric == "not_estimated" or direction == "not_estimated" or not isinstance(magnitude, int | float):
        return "Not estimated: FloKit evaluated nothing for this action."
    verb = {"increase": "up", "decrease": "down"}.get(direction, direction)
    horizon = metric.removeprefix("roas_").removesuffix("d")
    if metric.startswith("roas_") and metric.endswith("d") and horizon.isdigit():
        return (
            f"Day-{horizon} ROAS of the managed spend {verb} by about {magnitude:.3f} "
            f"(revenue per unit of spend; {metric})."
        )
    if metric.endswith("_rate"):
        subject, against = _IMPACT_SUBJECTS.get(metric, (metric.replace("_", " "), ""))
        return (
            f"{subject[0].upper()}{subject[1:]} {verb} by about {magnitude * 100:.2f} percentage points"
            f"{against} ({metric})."
        )
    return f"{metric}: {verb} by {magnitude:g}."
