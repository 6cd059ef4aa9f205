"""The executor's plan: which platform objects an approved action writes, to which ABSOLUTE
values, in which order, and whether the workspace's policy allows it. Pure: the orchestration
(`orchestration/actions/executor.py`) reads the registry and the live values and does the I/O.

What is supported (docs/actions-engine.md "Executor"):
- `budget_shift`: both campaigns on ONE ad account (a shift across accounts or platforms is two
  actions, design note §5.8 (f)), in the parameters' currency. The budget object of a campaign
  is the campaign when it has a daily budget of its own (Meta CBO, every Apple campaign, the
  sandbox); a Meta campaign without one (ad-set budgets) is supported when exactly one of its
  live ad sets carries a budget. With several, splitting the amount among them would be a choice
  nobody made, so it is refused, saying so.
- `creative_pause`: every live ad (Meta, sandbox) or ad group (Apple) mapped to the creative
  within the campaign, each `active` → `paused`.
- `offer_test`: FloKit's own paywall gateway, planned in the orchestration (no ad account).

Legs are ordered decreases first (design note §5.5): if a later leg fails, total spend has
only gone down.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from transforms.actions.policy import Policy
from transforms.adaccounts import money
from transforms.adaccounts.entities import PlatformEntity
from transforms.experiments.assignment import Weighted
from transforms.experiments.model import Metric
from transforms.paywall import PaywallDocument, Variant

# Older registry rows than this are not a basis for a write (the issue: "the data is stale").
MAX_REGISTRY_AGE = timedelta(hours=48)
# The budget-carrying objects per platform, and the object a creative maps to.
CREATIVE_OBJECT = {"meta": "ad", "apple_search_ads": "ad_group", "sandbox": "ad"}
# When a change takes effect after the platform accepted it (design note §3 [R11]): a Meta
# budget about 15 min, a Meta pause up to 24 h. Apple documents no delay for a campaign budget
# or an ad-group status, so 0 (the change is live when the API answers; noted in the docs). The
# sandbox and FloKit's own gateway are changed in place: 0. (The gateway caches configs for
# 60 s, `transforms.paywall.CACHE_CONTROL`, plus 300 s stale-while-revalidate: 6 min.)
PROPAGATION: dict[tuple[str, str], timedelta] = {
    ("meta", "daily_budget"): timedelta(minutes=15),
    ("meta", "status"): timedelta(hours=24),
    ("apple_search_ads", "daily_budget"): timedelta(0),
    ("apple_search_ads", "status"): timedelta(0),
    ("sandbox", "daily_budget"): timedelta(0),
    ("sandbox", "status"): timedelta(0),
    ("flokit", "paywall_config"): timedelta(minutes=6),
}
# A two-arm offer test splits traffic evenly (design note §5.2, "control vs treatment 50/50").
OFFER_TEST_SPLIT = 0.5
_COUNTRY = re.compile(r"[A-Z]{2}")


@dataclass(frozen=True)
class RegistryObject:
    """One registry row with what the plan needs of its account."""

    ad_account_id: str
    platform: str
    account_currency: str | None
    entity: PlatformEntity
    synced_at: datetime
    removed: bool = False


@dataclass(frozen=True)
class Leg:
    leg: int
    ad_account_id: str | None
    platform: str
    object_type: str
    object_id: str
    parent_id: str | None
    field: str  # daily_budget | status | paywall_config
    before: Any  # the registry's (or the live config's) value the plan was made from
    after: Any  # the ABSOLUTE target
    currency: str | None = None
    label: str = ""

    @property
    def decrease(self) -> bool:
        if self.field == "daily_budget":
            return int(self.after) < int(self.before)
        return self.field == "status" and self.after == "paused"


@dataclass(frozen=True)
class Plan:
    legs: tuple[Leg, ...]
    summary: str
    checks: dict[str, Any]


@dataclass(frozen=True)
class Refusal:
    reason: str
    checks: dict[str, Any]


def ordered(legs: list[Leg]) -> tuple[Leg, ...]:
    """Decreases first, then the rest, numbered 1.. in that order (the ledger's `leg`)."""
    first = [leg for leg in legs if leg.decrease] + [leg for leg in legs if not leg.decrease]
    return tuple(replace(x, leg=i) for i, x in enumerate(first, start=1))


def propagation(legs: tuple[Leg, ...] | list[Leg]) -> timedelta:
    """The longest delay among the legs' platform/field pairs: when the whole change is live."""
    return max((PROPAGATION.get((leg.platform, leg.field), timedelta(0)) for leg in legs), default=timedelta(0))


def _campaigns(objects: list[RegistryObject], label: str) -> list[RegistryObject]:
    return [
        o for o in objects if not o.removed and o.entity.entity_type == "campaign" and o.entity.report_campaign == label
    ]


def budget_object(objects: list[RegistryObject], campaign: RegistryObject) -> RegistryObject | str:
    """The object holding the campaign's daily budget, or why there is none FloKit can write."""
    if campaign.entity.daily_budget is not None:
        return campaign
    if campaign.platform != "meta":
        return f"campaign {campaign.entity.name!r} has no daily budget on {campaign.platform}"
    sets = [
        o
        for o in objects
        if not o.removed
        and o.ad_account_id == campaign.ad_account_id
        and o.entity.entity_type == "ad_set"
        and o.entity.parent_external_id == campaign.entity.external_id
        and o.entity.daily_budget is not None
    ]
    if len(sets) == 1:
        return sets[0]
    if not sets:
        return f"campaign {campaign.entity.name!r} has no daily budget and none of its ad sets has one"
    return (
        f"campaign {campaign.entity.name!r} budgets {len(sets)} ad sets separately; FloKit shifts a campaign "
        "budget (CBO) or the budget of a campaign's only budgeted ad set, and does not choose how to split "
        "an amount among several"
    )


def managed_daily_budget(objects: list[RegistryObject], ad_account_id: str) -> int:
    """The account's live daily budgets summed (minor units): campaigns with a budget, and the
    budgeted ad sets of Meta campaigns without one. Paused objects spend nothing, so they are out."""
    own = {
        o.entity.external_id
        for o in objects
        if o.ad_account_id == ad_account_id and o.entity.entity_type == "campaign" and o.entity.daily_budget is not None
    }
    total = 0
    for o in objects:
        if o.ad_account_id != ad_account_id or o.removed or o.entity.daily_budget is None:
            continue
        if o.entity.status != "active":
            continue
        if o.entity.entity_type == "campaign" or (
            o.entity.entity_type == "ad_set" and o.entity.parent_external_id not in own
        ):
            total += o.entity.daily_budget
    return total


def _amount(parameters: dict[str, Any]) -> tuple[int, str] | str:
    currency = str(parameters.get("currency", "")).upper()
    if not money.is_currency(currency):
        return f"currency {parameters.get('currency')!r} is not an ISO 4217 code"
    try:
        amount = money.to_minor(Decimal(str(parameters.get("amount_per_day"))), currency)
    except (InvalidOperation, ValueError) as error:
        return f"amount_per_day {parameters.get('amount_per_day')!r}: {error}"
    if amount <= 0:
        return f"amount_per_day must be positive, got {parameters.get('amount_per_day')!r}"
    return amount, currency


def plan_budget_shift(
    parameters: dict[str, Any], objects: list[RegistryObject], policy: Policy, *, now: datetime
) -> Plan | Refusal:
    """Two legs: the source's budget down by the amount, the recipient's up by it (absolute)."""
    checks: dict[str, Any] = {"parameters": parameters}
    parsed = _amount(parameters)
    if isinstance(parsed, str):
        return Refusal(parsed, checks)
    amount, currency = parsed
    resolved: list[RegistryObject] = []
    for key in ("from_campaign", "to_campaign"):
        label = str(parameters.get(key, ""))
        found = _campaigns(objects, label)
        if not found:
            return Refusal(f"{key} {label!r} is not a campaign of a live ad account's registry", checks)
        if len(found) > 1:
            where = ", ".join(sorted(f"{o.ad_account_id}/{o.entity.external_id}" for o in found))
            return Refusal(f"{key} {label!r} names {len(found)} campaigns ({where}); FloKit will not pick one", checks)
        target = budget_object(objects, found[0])
        if isinstance(target, str):
            return Refusal(target, checks)
        resolved.append(target)
    source, recipient = resolved
    if source.ad_account_id != recipient.ad_account_id:
        return Refusal(
            "the two campaigns are on different ad accounts; a shift across accounts or platforms is two actions",
            checks,
        )
    for obj in resolved:
        if (obj.entity.currency or obj.account_currency or "").upper() != currency:
            return Refusal(
                f"{obj.entity.name!r} is budgeted in {obj.entity.currency or obj.account_currency}, not {currency}",
                checks,
            )
        age = now - obj.synced_at
        if age > MAX_REGISTRY_AGE:
            return Refusal(
                f"the registry's copy of {obj.entity.name!r} was synced {age} ago (more than "
                f"{MAX_REGISTRY_AGE}); sync the ad account first",
                checks,
            )
    assert source.entity.daily_budget is not None and recipient.entity.daily_budget is not None
    legs = [
        Leg(0, source.ad_account_id, source.platform, source.entity.entity_type, source.entity.external_id,
            source.entity.parent_external_id, "daily_budget", source.entity.daily_budget,
            source.entity.daily_budget - amount, currency, str(parameters["from_campaign"])),
        Leg(0, recipient.ad_account_id, recipient.platform, recipient.entity.entity_type,
            recipient.entity.external_id, recipient.entity.parent_external_id, "daily_budget",
            recipient.entity.daily_budget, recipient.entity.daily_budget + amount, currency,
            str(parameters["to_campaign"])),
    ]  # fmt: skip
    managed = managed_daily_budget(objects, source.ad_account_id)
    checks.update(amount_minor=amount, currency=currency, managed_daily_budget=managed)
    refusal = check_policy(legs, policy, managed=managed, amount=amount, currency=currency)
    if refusal is not None:
        return Refusal(refusal, checks)
    text = money.major_text
    summary = (
        f"Shift {text(amount, currency)} {currency}/day: {legs[0].label} {text(legs[0].before, currency)} → "
        f"{text(legs[0].after, currency)}, {legs[1].label} {text(legs[1].before, currency)} → "
        f"{text(legs[1].after, currency)}"
    )
    return Plan(ordered(legs), summary, checks)


def check_policy(legs: list[Leg], policy: Policy, *, managed: int, amount: int, currency: str) -> str | None:
    """Why the budget legs break the policy, or None (new budget > 0, each leg within
    `max_leg_change` of its budget, the amount within `max_portfolio_change` of managed spend)."""
    for leg in legs:
        before, after = int(leg.before), int(leg.after)
        if after <= 0:
            return f"{leg.label}: the new budget would be {money.major_text(after, currency)} {currency} (must be > 0)"
        change = abs(after - before) / before if before else float("inf")
        if change > policy.max_leg_change:
            return (
                f"{leg.label}: changes its budget by {change:.1%} (policy max_leg_change {policy.max_leg_change:.0%})"
            )
    share = amount / managed if managed else float("inf")
    if share > policy.max_portfolio_change:
        return (
            f"moves {money.major_text(amount, currency)} {currency}/day, {share:.1%} of the account's managed "
            f"daily budget {money.major_text(managed, currency)} {currency} "
            f"(policy max_portfolio_change {policy.max_portfolio_change:.0%})"
        )
    return None


def plan_creative_pause(parameters: dict[str, Any], objects: list[RegistryObject], *, now: datetime) -> Plan | Refusal:
    """One leg per live object mapped to the creative within the campaign, `active` → `paused`."""
    checks: dict[str, Any] = {"parameters": parameters}
    creative, campaign = str(parameters.get("creative", "")), str(parameters.get("campaign", ""))
    mapped = [
        o
        for o in objects
        if not o.removed
        and o.entity.entity_type == CREATIVE_OBJECT.get(o.platform)
        and o.entity.report_creative == creative
        and o.entity.report_campaign == campaign
    ]
    if not mapped:
        return Refusal(f"creative {creative!r} of campaign {campaign!r} maps to no ad in a live ad account", checks)
    active = [o for o in mapped if o.entity.status == "active"]
    checks["mapped"] = [f"{o.ad_account_id}/{o.entity.external_id}" for o in mapped]
    if not active:
        return Refusal(f"every ad of creative {creative!r} in {campaign!r} is already paused or inactive", checks)
    for obj in active:
        age = now - obj.synced_at
        if age > MAX_REGISTRY_AGE:
            return Refusal(
                f"the registry's copy of {obj.entity.name!r} was synced {age} ago (more than "
                f"{MAX_REGISTRY_AGE}); sync the ad account first",
                checks,
            )
    legs = [
        Leg(0, o.ad_account_id, o.platform, o.entity.entity_type, o.entity.external_id, o.entity.parent_external_id,
            "status", "active", "paused", None, o.entity.name)
        for o in sorted(active, key=lambda o: (o.ad_account_id, o.entity.external_id))
    ]  # fmt: skip
    return Plan(ordered(legs), f"Pause {len(legs)} ad(s) of creative {creative} in {campaign}", checks)


def reverted(legs: list[Leg]) -> tuple[Leg, ...]:
    """The revert of verified apply legs: each writes its `before` back, decreases first."""
    return ordered([replace(x, before=x.after, after=x.before) for x in legs])


def _offer(document: PaywallDocument, product_id: str) -> Any:
    for variant in document.variants:
        for offer in variant.offers:
            if offer.product_id == product_id:
                return offer
    return None


def offer_test_document(
    document: PaywallDocument, *, control: str, treatment: str, action_id: str
) -> PaywallDocument | str:
    """The live document with the offer test's treatment arm added: the control variant (the one
    everyone sees now, the first) stays first, and so everyone's default; the treatment variant is
    the control with the control offer replaced by the treatment offer, appended at weight 0. The
    split is the experiment's (`offer_test_experiment`), which the gateway serves, not the
    document's: `experiment_active` stays off, and the other variants stay, since a running
    experiment may name them. Both offers must be in the live document: FloKit knows an offer's
    price and terms only from there."""
    if document.experiment_active:
        return "the paywall already splits its traffic by experiment_active; end that split first"
    base = document.variants[0]
    control_offer, treatment_offer = _offer(document, control), _offer(document, treatment)
    if control_offer is None or all(o.product_id != control for o in base.offers):
        return f"the control offer {control!r} is not an offer of the variant everyone sees ({base.variant_id})"
    if treatment_offer is None:
        return f"the treatment offer {treatment!r} is not in the live config, so its price and terms are unknown"
    offers = [treatment_offer if o.product_id == control else o for o in base.offers]
    arm = Variant(
        variant_id=treatment_variant_id(action_id),
        layout=base.layout,
        offers=offers,
        cta_copy=base.cta_copy,
        traffic_weight=0.0,
    )
    return PaywallDocument(experiment_active=False, variants=[*document.variants, arm])


def treatment_variant_id(action_id: str) -> str:
    return f"treatment_{action_id}"[:100]


@dataclass(frozen=True)
class OfferTestExperiment:
    """The experiment an approved offer test starts on each app's paywall."""

    name: str
    variants: tuple[Weighted, Weighted]  # control first
    primary_metric: Metric
    audience: dict[str, Any] | None


def offer_test_experiment(
    parameters: dict[str, Any], *, control_variant_id: str, action_id: str
) -> OfferTestExperiment:
    """Control against treatment at `OFFER_TEST_SPLIT`, read on revenue per user at D14 (the
    design's `arpu_d14`, which weighs the treatment's price and its conversion together), for the
    users of the country the test was proposed for (the audience's `country`; a test proposed for
    no single country takes everyone)."""
    country = str(parameters.get("country") or "")
    control, treatment = str(parameters.get("control_offer")), str(parameters.get("treatment_offer"))
    where = f" in {country}" if _COUNTRY.fullmatch(country) else ""
    return OfferTestExperiment(
        name=f"Offer test: {treatment} against {control}{where}"[:200],
        variants=(
            Weighted(control_variant_id, OFFER_TEST_SPLIT),
            Weighted(treatment_variant_id(action_id), 1 - OFFER_TEST_SPLIT),
        ),
        primary_metric="revenue_per_user_d14",
        audience={"country": [country]} if where else None,
    )
