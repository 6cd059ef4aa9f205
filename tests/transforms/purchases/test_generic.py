"""FloKit's generic formats: checked field by field, mapped to facts and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from transforms.ingest.attribution import Dropped
from transforms.purchases import generic

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def body(**fields: Any) -> dict[str, Any]:
    return {
        "id": "e1",
        "type": "purchase",
        "user_id": "u1",
        "purchase_id": "p1",
        "occurred_at": "2026-05-01T11:00:00Z",
        "expires_at": "2026-06-01T11:00:00Z",
        "revenue": 5,
        "currency": "usd",
    } | fields


@pytest.mark.parametrize(
    ("fields", "named"),
    [({"id": None}, "id"), ({"type": "bought"}, "type"), ({"expires_at": None}, "expires_at"),
     ({"occurred_at": "soon"}, "occurred_at"), ({"currency": None}, "currency"), ({"revenue": -1}, "revenue"),
     ({"kind": "forever"}, "kind"), ({"in_trial": "yes"}, "in_trial"),
     ({"billing_period": "fortnightly"}, "billing_period"), ({"billing_period": "PT1H"}, "billing_period")],
)  # fmt: skip
def test_a_body_outside_the_format_is_refused_naming_the_field(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(generic.Invalid, match=named):
        generic.parse_subscription(body(**fields))


def test_purchase_grants_until_expiry_and_lands_a_start_with_revenue() -> None:
    event = generic.parse_subscription(body())
    fact = generic.subscription_fact(event)
    assert fact.store_key == "p1" and fact.user_hint == "u1" and fact.channel == "web"
    assert fact.active_at(NOW) and not fact.active_at(NOW + timedelta(days=32))
    [start] = generic.subscription_events(event, workspace_id="ws", user_id=None, received_at=NOW)
    assert (start.event_type, start.event_id) == ("subscription_start", "generic:p1:e1:subscription_start")
    assert start.properties["revenue"] == 5.0 and start.properties["currency"] == "USD"


def test_a_period_carries_its_end_and_the_billing_period_the_sender_names() -> None:
    named = generic.parse_subscription(body(billing_period="quarterly"))
    [start] = generic.subscription_events(named, workspace_id="ws", user_id=None, received_at=NOW)
    assert start.properties["period_ends_at"] == "2026-06-01T11:00:00.000Z"
    assert start.properties["billing_period"] == "P3M"
    renewal = generic.parse_subscription(body(type="renewal", id="e3", billing_period="P2W"))
    [renewed] = generic.subscription_events(renewal, workspace_id="ws", user_id=None, received_at=NOW)
    assert (renewed.event_type, renewed.properties["billing_period"]) == ("renewal", "P2W")
    unnamed = generic.parse_subscription(body())
    [start] = generic.subscription_events(unnamed, workspace_id="ws", user_id=None, received_at=NOW)
    assert start.properties["period_ends_at"] == "2026-06-01T11:00:00.000Z" and "billing_period" not in start.properties
    refund = generic.parse_subscription(body(type="refund", id="e2", billing_period="monthly"))
    [refunded] = generic.subscription_events(refund, workspace_id="ws", user_id=None, received_at=NOW)
    assert "period_ends_at" not in refunded.properties and "billing_period" not in refunded.properties


def test_refund_revokes_with_negative_revenue_and_grace_period_extends_access() -> None:
    refund = generic.parse_subscription(body(type="refund", id="e2"))
    assert not generic.subscription_fact(refund).active_at(NOW)
    [landed] = generic.subscription_events(refund, workspace_id="ws", user_id="u1", received_at=NOW)
    assert landed.properties["revenue"] == -5.0
    grace = generic.parse_subscription(
        body(type="grace_period", expires_at="2026-04-30T00:00:00Z", grace_ends_at="2026-05-03T00:00:00Z")
    )
    assert generic.subscription_fact(grace).active_at(NOW)
    assert generic.subscription_events(grace, workspace_id="ws", user_id="u1", received_at=NOW) == []


def test_lifetime_purchases_need_no_expiry() -> None:
    event = generic.parse_subscription(body(kind="lifetime", expires_at=None))
    assert generic.subscription_fact(event).active_at(NOW + timedelta(days=9999))
    [bought] = generic.subscription_events(event, workspace_id="ws", user_id=None, received_at=NOW)
    assert bought.event_type == "purchase"


def test_attribution_events_take_canonical_types_and_drop_like_ingest() -> None:
    raw = {"id": "a1", "event_type": "install", "occurred_at": "2026-05-01T11:00:00Z", "country": "de", "idfa": "x"}
    mapped = generic.attribution_event(
        raw, app_id="app_1", workspace_id="ws", received_at=NOW, latest_rates={"EUR": 1.0}
    )
    assert not isinstance(mapped, Dropped) and mapped.country == "DE" and mapped.idfa == "x"
    again = generic.attribution_event(
        raw, app_id="app_1", workspace_id="ws", received_at=NOW, latest_rates={"EUR": 1.0}
    )
    assert not isinstance(again, Dropped) and again.event_id == mapped.event_id
    unknown = generic.attribution_event(
        raw | {"event_type": "level_up"}, app_id="app_1", workspace_id="ws", received_at=NOW, latest_rates={}
    )
    assert unknown == Dropped("unmapped_event")
    late = generic.attribution_event(
        raw | {"occurred_at": "2019-01-01T00:00:00Z"},
        app_id="app_1",
        workspace_id="ws",
        received_at=NOW,
        latest_rates={},
    )
    assert late == Dropped("out_of_range")


def test_every_event_names_its_purchase_and_a_paid_period_states_its_price() -> None:
    """What subscription metrics join on (`purchase_key`, the ledger's `store_key`) and read as
    MRR (the ledger's price of the latest paid transaction)."""
    paid = generic.parse_subscription(body(billing_period="monthly"))
    [start] = generic.subscription_events(paid, workspace_id="ws", user_id=None, received_at=NOW)
    assert (start.properties["purchase_key"], start.properties["transaction_id"]) == ("p1", "e1")
    fact = generic.subscription_fact(paid)
    assert (fact.price_amount, fact.price_currency, fact.priced_at, fact.billing_period) == (
        5.0,
        "USD",
        NOW - timedelta(hours=1),
        "P1M",
    )
    trial = generic.parse_subscription(body(in_trial=True, revenue=None, currency=None))
    assert generic.subscription_fact(trial).price_amount is None
    [started] = generic.subscription_events(trial, workspace_id="ws", user_id=None, received_at=NOW)
    assert started.event_type == "trial_start" and started.properties["purchase_key"] == "p1"
    yen = generic.parse_subscription(body(type="renewal", id="e2", revenue=1200, currency="JPY"))
    assert (generic.subscription_fact(yen).price_amount, generic.subscription_fact(yen).price_currency) == (
        1200.0,
        "JPY",
    )
    refund = generic.parse_subscription(body(type="refund", id="e9", revenue=5))
    [refunded] = generic.subscription_events(refund, workspace_id="ws", user_id=None, received_at=NOW)
    assert refunded.properties["purchase_key"] == "p1" and "transaction_id" not in refunded.properties
    assert generic.subscription_fact(refund).price_amount is None  # a refund is no paid transaction
    cancel = generic.parse_subscription(body(type="cancellation", id="e10", revenue=None, currency=None))
    [cancelled] = generic.subscription_events(cancel, workspace_id="ws", user_id=None, received_at=NOW)
    assert cancelled.properties["purchase_key"] == "p1"
