"""RevenueCat webhook events to facts and events (RevenueCat's documented fields)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from transforms.integrations.subscription_provider_a import event_id as sync_event_id
from transforms.purchases import subscription_provider_a as rc

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
MS = int(NOW.timestamp() * 1000)


def event(kind: str, **fields: Any) -> rc.Event:
    raw = {
        "id": "E1",
        "type": kind,
        "event_timestamp_ms": MS,
        "app_user_id": "u1",
        "product_id": "pro",
        "period_type": "NORMAL",
        "purchased_at_ms": MS - 1000,
        "expiration_at_ms": MS + 7 * 86_400_000,
        "environment": "PRODUCTION",
        "store": "APP_STORE",
        "transaction_id": "T2",
        "original_transaction_id": "T1",
        "price": 4.99,
        "price_in_purchased_currency": 4.49,
        "currency": "EUR",
    } | fields
    return rc.parse({"api_version": "1.0", "event": raw})


def events(e: rc.Event) -> list[Any]:
    return rc.events(e, workspace_id="ws", user_id=None, received_at=NOW)


@pytest.mark.parametrize(
    ("store", "channel"),
    [("APP_STORE", "iap"), ("PLAY_STORE", "iap"), ("AMAZON", "iap"), ("MAC_APP_STORE", "iap"),
     ("STRIPE", "web"), ("RC_BILLING", "web"), ("PROMOTIONAL", "promotional")],
)  # fmt: skip
def test_the_store_decides_the_channel(store: str, channel: str) -> None:
    fact = rc.fact(event("INITIAL_PURCHASE", store=store))
    assert fact is not None and fact.channel == channel and fact.store_key == "T1"


def test_a_trial_purchase_lands_a_trial_start_without_revenue_and_its_conversion_the_syncs_id() -> None:
    trial = event("INITIAL_PURCHASE", period_type="TRIAL", transaction_id="T1")
    fact = rc.fact(trial)
    assert fact is not None and fact.in_trial and fact.user_hint == "u1"
    [start] = events(trial)
    assert start.event_id == sync_event_id("T1", "trial_start") and "revenue" not in start.properties
    [converted] = events(event("RENEWAL", is_trial_conversion=True))
    assert converted.event_id == sync_event_id("T2", "trial_converted")
    assert converted.properties["revenue"] == 4.99 and converted.properties["local_revenue"] == 4.49


def test_cancellation_turns_auto_renew_off_and_keeps_access_and_is_named_by_the_original_transaction() -> None:
    fact = rc.fact(event("CANCELLATION", cancel_reason="UNSUBSCRIBE"))
    assert fact is not None and fact.auto_renew is False and fact.active_at(NOW)
    [cancel] = events(event("CANCELLATION", cancel_reason="UNSUBSCRIBE"))
    assert cancel.event_id == sync_event_id("T1", "cancellation")


def test_non_renewing_purchases_are_lifetime_unless_revenuecat_gives_an_expiry() -> None:
    lifetime = rc.fact(event("NON_RENEWING_PURCHASE", expiration_at_ms=None))
    assert lifetime is not None and lifetime.kind == "lifetime" and lifetime.active_at(NOW + timedelta(days=999))
    [bought] = events(event("NON_RENEWING_PURCHASE", expiration_at_ms=None))
    assert bought.event_type == "purchase"
    timed = rc.fact(event("NON_RENEWING_PURCHASE"))
    assert timed is not None and timed.kind == "subscription" and not timed.active_at(NOW + timedelta(days=8))


def test_sandbox_changes_access_but_lands_no_events_and_anonymous_ids_name_no_user() -> None:
    sandbox = event("INITIAL_PURCHASE", environment="SANDBOX")
    assert rc.fact(sandbox).environment == "sandbox"  # type: ignore[union-attr]
    assert events(sandbox) == []
    anonymous = rc.fact(event("INITIAL_PURCHASE", app_user_id="$RCAnonymousID:8069238d6049ce87cc529853916d624c"))
    assert anonymous is not None and anonymous.user_hint is None


def test_transfer_and_test_events_state_no_purchase() -> None:
    transfer = event("TRANSFER", transferred_from=["a", "b"], transferred_to=["$RCAnonymousID:x", "c"])
    assert rc.fact(transfer) is None
    assert rc.transfer_users(transfer) == (("a", "b"), "c")
    assert rc.fact(event("TEST")) is None and events(event("TEST")) == []


def test_a_body_that_is_not_an_event_is_refused() -> None:
    for body in ({}, {"event": {"type": "RENEWAL"}}, {"event": {"id": "E", "type": "RENEWAL"}}, []):
        with pytest.raises(rc.NotAnEvent):
            rc.parse(body)


def test_a_refunded_one_time_purchase_is_revoked() -> None:
    refund = rc.fact(event("CANCELLATION", cancel_reason="CUSTOMER_SUPPORT", expiration_at_ms=None))
    assert refund is not None and refund.revoked_at == NOW and not refund.active_at(NOW)


def test_every_event_names_the_original_transaction_and_a_paid_one_its_local_price() -> None:
    renewal = event("RENEWAL", price=80.0, price_in_purchased_currency=12000, currency="JPY")
    fact = rc.fact(renewal)
    assert fact is not None
    assert (fact.price_amount, fact.price_currency, fact.priced_at) == (12000.0, "JPY", NOW - timedelta(seconds=1))
    assert fact.billing_period is None  # RevenueCat's events name no period length
    [renewed] = events(renewal)
    assert (renewed.properties["purchase_key"], renewed.properties["transaction_id"]) == ("T1", "T2")
    assert renewed.properties["period_ends_at"] == "2026-05-08T12:00:00.000Z"
    assert "billing_period" not in renewed.properties
    trial = rc.fact(event("INITIAL_PURCHASE", period_type="TRIAL", price=0, price_in_purchased_currency=0))
    assert trial is not None and (trial.price_amount, trial.price_currency, trial.priced_at) == (None, None, None)
    usd_only = rc.fact(event("INITIAL_PURCHASE", price_in_purchased_currency=None))
    assert usd_only is not None and (usd_only.price_amount, usd_only.price_currency) == (4.99, "USD")
    cancelled = event("CANCELLATION", cancel_reason="UNSUBSCRIBE")
    assert rc.fact(cancelled).price_amount is None  # type: ignore[union-attr]  # keeps the ledger's
    [cancel] = events(cancelled)
    assert cancel.properties["purchase_key"] == "T1" and "period_ends_at" not in cancel.properties


def test_a_refund_names_the_refunded_transaction_and_its_purchase() -> None:
    [refund] = events(event("CANCELLATION", cancel_reason="CUSTOMER_SUPPORT"))
    assert refund.event_type == "refund"
    assert (refund.properties["purchase_key"], refund.properties["transaction_id"]) == ("T1", "T2")
    assert refund.properties["revenue"] == -4.99
    [one_time] = events(event("NON_RENEWING_PURCHASE", original_transaction_id=None, transaction_id="T9"))
    assert one_time.properties["purchase_key"] == "T9" and "period_ends_at" not in one_time.properties
