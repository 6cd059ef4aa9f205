"""The executor's plan on literal registries: which objects, which absolute values, in which
order, and the refusals (what is not supported, stale copies, the policy's caps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from transforms.actions import execution as ex
from transforms.actions.policy import DEFAULT
from transforms.adaccounts.entities import PlatformEntity

ACCOUNT = "adacct_1"


def obj(
    kind: str, external_id: str, name: str, *, budget: int | None = None, parent: str | None = None,
    campaign: str | None = None, creative: str | None = None, status: str = "active", platform: str = "meta",
    synced: datetime | None = None,
) -> ex.RegistryObject:  # fmt: skip
    entity = PlatformEntity(kind, external_id, parent, name, status, budget, "USD" if budget else None, None,
                            campaign, creative)  # fmt: skip
    return ex.RegistryObject(ACCOUNT, platform, "USD", entity, synced or datetime.now(UTC))


def registry(**overrides: ex.RegistryObject) -> list[ex.RegistryObject]:
    base = {
        "broad": obj("campaign", "c1", "meta_broad", budget=50000, campaign="meta_broad"),
        "uac": obj("campaign", "c2", "meta_uac", budget=40000, campaign="meta_uac"),
        "cr1a": obj("ad", "a1", "cr1", parent="s1", campaign="meta_broad", creative="cr1"),
        "cr1b": obj("ad", "a2", "cr1", parent="s2", campaign="meta_broad", creative="cr1", status="paused"),
        "cr1c": obj("ad", "a3", "cr1", parent="s3", campaign="meta_uac", creative="cr1"),
    }
    base.update(overrides)
    return list(base.values())


SHIFT = {"from_campaign": "meta_broad", "to_campaign": "meta_uac", "amount_per_day": 40, "currency": "USD"}


def test_a_shift_is_two_absolute_legs_decrease_first() -> None:
    plan = ex.plan_budget_shift(SHIFT | {"from_campaign": "meta_uac", "to_campaign": "meta_broad"}, registry(),
                                DEFAULT, now=datetime.now(UTC))  # fmt: skip
    assert isinstance(plan, ex.Plan)
    assert [(leg.leg, leg.object_id, leg.before, leg.after) for leg in plan.legs] == [
        (1, "c2", 40000, 36000), (2, "c1", 50000, 54000)]  # fmt: skip
    assert plan.checks["managed_daily_budget"] == 90000


def test_a_meta_campaign_budgeted_by_its_only_ad_set_shifts_that_ad_set() -> None:
    objects = registry(
        broad=obj("campaign", "c1", "meta_broad", campaign="meta_broad"),
        set1=obj("ad_set", "s1", "set1", budget=50000, parent="c1", campaign="meta_broad"),
    )
    plan = ex.plan_budget_shift(SHIFT, objects, DEFAULT, now=datetime.now(UTC))
    assert isinstance(plan, ex.Plan) and (plan.legs[0].object_type, plan.legs[0].object_id) == ("ad_set", "s1")


def test_several_budgeted_ad_sets_are_refused_rather_than_split() -> None:
    objects = registry(
        broad=obj("campaign", "c1", "meta_broad", campaign="meta_broad"),
        set1=obj("ad_set", "s1", "set1", budget=25000, parent="c1"),
        set2=obj("ad_set", "s2", "set2", budget=25000, parent="c1"),
    )
    refusal = ex.plan_budget_shift(SHIFT, objects, DEFAULT, now=datetime.now(UTC))
    assert isinstance(refusal, ex.Refusal) and "budgets 2 ad sets separately" in refusal.reason


def test_policy_caps_stale_registries_and_unknown_campaigns_are_refused() -> None:
    now = datetime.now(UTC)
    over_leg = ex.plan_budget_shift(SHIFT | {"amount_per_day": 85}, registry(), DEFAULT, now=now)
    assert isinstance(over_leg, ex.Refusal) and "meta_uac: changes its budget by 21.2%" in over_leg.reason
    # $60 is 12 % and 15 % of the two budgets, 6.7 % of the $900 managed: over a 5 % portfolio cap.
    tight = DEFAULT.changed(max_portfolio_change=0.05)
    over_total = ex.plan_budget_shift(SHIFT | {"amount_per_day": 60}, registry(), tight, now=now)
    assert isinstance(over_total, ex.Refusal) and "max_portfolio_change 5%" in over_total.reason
    stale = registry(broad=obj("campaign", "c1", "meta_broad", budget=50000, campaign="meta_broad",
                               synced=now - timedelta(hours=49)))  # fmt: skip
    old = ex.plan_budget_shift(SHIFT, stale, DEFAULT, now=now)
    assert isinstance(old, ex.Refusal) and "sync the ad account first" in old.reason
    unknown = ex.plan_budget_shift(SHIFT | {"to_campaign": "tiktok_x"}, registry(), DEFAULT, now=now)
    assert isinstance(unknown, ex.Refusal) and "'tiktok_x' is not a campaign" in unknown.reason
    wrong = ex.plan_budget_shift(SHIFT | {"currency": "EUR"}, registry(), DEFAULT, now=now)
    assert isinstance(wrong, ex.Refusal) and "not EUR" in wrong.reason


def test_a_creative_pause_targets_the_active_ads_of_that_creative_in_that_campaign() -> None:
    plan = ex.plan_creative_pause({"creative": "cr1", "campaign": "meta_broad"}, registry(), now=datetime.now(UTC))
    assert isinstance(plan, ex.Plan)
    assert [(leg.object_id, leg.before, leg.after) for leg in plan.legs] == [("a1", "active", "paused")]
    none = ex.plan_creative_pause({"creative": "cr9", "campaign": "meta_broad"}, registry(), now=datetime.now(UTC))
    assert isinstance(none, ex.Refusal)


def test_a_revert_swaps_before_and_after_and_puts_the_decrease_first() -> None:
    plan = ex.plan_budget_shift(SHIFT, registry(), DEFAULT, now=datetime.now(UTC))
    assert isinstance(plan, ex.Plan)
    back = ex.reverted(list(plan.legs))
    assert [(leg.leg, leg.object_id, leg.before, leg.after) for leg in back] == [
        (1, "c2", 44000, 40000), (2, "c1", 46000, 50000)]  # fmt: skip
    assert ex.propagation(plan.legs) == timedelta(minutes=15)
