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
    }
    assert landed == map_row(row, workspace_id="ws", source="subscription_provider_b", received_at=NOW)
    assert e.dedup_key == "pe-1"


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
