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
            f"The executor moves {parameters.get('amount_per_day')} {parameters.get('currency')} a day of budget "
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
