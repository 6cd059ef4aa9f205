"""Adapty webhook events to facts and events (Adapty's documented fields)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from transforms.integrations.subscription_provider_b import map_row
from transforms.purchases import subscription_provider_b

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%f+0000")


def event(kind: str, **props: Any) -> subscription_provider_b.Event:
    body = {
        "profile_id": "p-1",
        "customer_user_id": "u1",
        "event_type": kind,
        "event_datetime": stamp(NOW),
        "event_properties": {
            "store": "app_store",
            "environment": "Production",
            "price_usd": 9.99,
            "price_local": 9.49,
            "currency": "EUR",
            "transaction_id": "T2",
            "original_transaction_id": "T1",
            "vendor_product_id": "pro",
            "profile_event_id": "pe-1",
            "subscription_expires_at": stamp(NOW + timedelta(days=30)),
        }
        | props,
    }
    parsed = subscription_provider_b.parse(body)
    assert parsed is not None
    return parsed


def test_the_webhook_lands_what_the_export_row_of_the_same_event_lands() -> None:
    e = event("subscription_renewed")
    [landed] = subscription_provider_b.events(e, workspace_id="ws", user_id=None, received_at=NOW)
    row = {
        "profile_id": "p-1",
        "customer_user_id": "u1",
        "event_type": "subscription_renewed",
        "event_datetime": stamp(NOW),
        "transaction_id": "T2",
        "original_transaction_id": "T1",
        "environment": "Production",
        "revenue_usd": "9.99",
        "revenue_local": "9.49",
        "currency": "EUR",
        "store": "app_store",
        "product_id": "pro",
        "subscription_expires_at": stamp(NOW + timedelta(days=30)),
    }
    assert landed == map_row(row, workspace_id="ws", source="subscription_provider_b", received_at=NOW)
    assert e.dedup_key == "pe-1"
    # An export row without the expiry (a column the export does not document): the same event,
    # the same id and purchase, without the period's end.
    del row["subscription_expires_at"]
    exported = map_row(row, workspace_id="ws", source="subscription_provider_b", received_at=NOW)
    assert not isinstance(exported, str)
    assert exported.event_id == landed.event_id and exported.properties["purchase_key"] == "T1"
    assert {k: v for k, v in landed.properties.items() if k != "period_ends_at"} == exported.properties


@pytest.mark.parametrize(
    ("kind", "active", "auto_renew"),
    [("subscription_started", True, True), ("trial_started", True, True),
     ("subscription_renewal_cancelled", True, False), ("subscription_renewal_reactivated", True, None),
     ("subscription_expired", False, False), ("subscription_refunded", False, None)],
)  # fmt: skip
def test_what_each_type_states(kind: str, active: bool, auto_renew: bool | None) -> None:
    fact = subscription_provider_b.fact(event(kind))
    assert fact is not None and fact.active_at(NOW + timedelta(seconds=1)) is active
    assert fact.auto_renew is auto_renew and fact.store_key == "T1" and fact.user_hint == "u1"
    assert fact.in_trial is (kind == "trial_started")


def test_one_time_purchases_are_lifetime_and_access_level_updated_states_refunds_and_grace() -> None:
    bought = subscription_provider_b.fact(event("non_subscription_purchase", subscription_expires_at=None))
    assert bought is not None and bought.kind == "lifetime" and bought.active_at(NOW + timedelta(days=999))
    grace = subscription_provider_b.fact(
        event(
            "access_level_updated",
            is_active=True,
            is_in_grace_period=True,
            expires_at=stamp(NOW + timedelta(days=3)),
            subscription_expires_at=stamp(NOW - timedelta(days=1)),
        )
    )
    assert (
        grace is not None and grace.active_at(NOW + timedelta(days=2)) and not grace.active_at(NOW + timedelta(days=4))
    )
    refunded = subscription_provider_b.fact(
        event("access_level_updated", is_active=False, is_refund=True, expires_at=stamp(NOW))
    )
    assert refunded is not None and refunded.revoked_at == NOW and not refunded.active_at(NOW)


def test_sandbox_is_recorded_as_sandbox_and_a_body_without_an_event_is_none() -> None:
    fact = subscription_provider_b.fact(event("subscription_started", environment="Sandbox"))
    assert fact is not None and fact.environment == "sandbox"
    assert (
        subscription_provider_b.events(
            event("subscription_started", environment="Sandbox"), workspace_id="ws", user_id=None, received_at=NOW
        )
        == []
    )
    assert subscription_provider_b.parse({}) is None
    with pytest.raises(subscription_provider_b.NotAnEvent):
        subscription_provider_b.parse({"event_type": "subscription_started", "event_datetime": "yesterday"})


def test_events_name_their_purchase_and_a_paid_event_states_its_local_price() -> None:
    renewed = event(
        "subscription_renewed", price_local=1200, currency="JPY", purchase_date=stamp(NOW - timedelta(hours=1))
    )
    fact = subscription_provider_b.fact(renewed)
    assert fact is not None
    assert (fact.price_amount, fact.price_currency, fact.priced_at) == (1200.0, "JPY", NOW - timedelta(hours=1))
    assert fact.billing_period is None  # Adapty's documented properties name no period length
    [landed] = subscription_provider_b.events(renewed, workspace_id="ws", user_id=None, received_at=NOW)
    assert (landed.properties["purchase_key"], landed.properties["transaction_id"]) == ("T1", "T2")
    assert landed.properties["period_ends_at"] == "2026-05-31T12:00:00.000Z"
    trial = subscription_provider_b.fact(event("trial_started", price_local=0, price_usd=0))
    assert trial is not None and (trial.price_amount, trial.price_currency, trial.priced_at) == (None, None, None)
    [started] = subscription_provider_b.events(event("trial_started"), workspace_id="ws", user_id=None, received_at=NOW)
    assert started.event_type == "trial_start" and started.properties["purchase_key"] == "T1"
    cancelled = subscription_provider_b.fact(event("subscription_renewal_cancelled"))
    assert cancelled is not None and cancelled.price_amount is None  # keeps the ledger's


def test_a_refund_names_the_refunded_transaction_and_its_purchase() -> None:
    refunded = event("subscription_refunded", transaction_id="T3")
    [refund] = subscription_provider_b.events(refunded, workspace_id="ws", user_id=None, received_at=NOW)
    assert refund.event_type == "refund" and "period_ends_at" not in refund.properties
    assert (refund.properties["purchase_key"], refund.properties["transaction_id"]) == ("T1", "T3")
    fact = subscription_provider_b.fact(refunded)
    assert fact is not None and fact.price_amount is None and fact.revoked_at == NOW
    one_time = event("non_subscription_purchase", original_transaction_id=None, transaction_id="T7")
    [bought] = subscription_provider_b.events(one_time, workspace_id="ws", user_id=None, received_at=NOW)
    assert bought.properties["purchase_key"] == "T7"
    assert subscription_provider_b.fact(one_time).store_key == "T7"  # type: ignore[union-attr]
