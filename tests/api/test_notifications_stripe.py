"""Stripe webhook events through the gateway's provider path, signed with the stripe library's
own test helper (`WebhookSignature.generate_signature_header`), applied to the ledger."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import stripe
from flask.testing import FlaskClient

from api.notifications.framework import NOT_VERIFIED, Context, replay
from tests.providers.stripe_fake import (
    KEY,
    WEBHOOK_SECRET,
    StripeFake,
    event,
    invoice_payment,
    one_time_invoice,
    post_event,
    refunded_charge,
    stripe_fake,
    subscription,
    subscription_invoice,
)
from tests.support import free_port
from tests.support.provider_notifications import connect, entitlement, landed, localstripe, settings, stored_count
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.settings import Settings

__all__ = ["settings", "stripe_fake"]

PATH = "/webhooks/payment_processor"


def integration(db: Database, workspace: dict[str, Any]) -> str:
    return connect(
        db,
        workspace["workspace_id"],
        "payment_processor",
        {"secret_key": "sk_test_0123456789abcdef", "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]},
    )


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/cache.py")
def test_a_wrong_secret_or_a_stale_signature_is_401_and_nothing_is_stored(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    body = event("customer.subscription.created", subscription("active"), event_id="evt_1")
    r = post_event(client, integration_id, body, secret="whsec_someone_else_0123456789")
    assert r.status_code == 401 and r.json == {"error": NOT_VERIFIED}
    r = post_event(client, integration_id, body, at=int(time.time()) - 600)
    assert r.status_code == 401
    r = client.post(f"{PATH}?integration=int_unknown", data=json.dumps(body), headers={"Stripe-Signature": "t=1,v1=00"})
    assert r.status_code == 401
    r = client.post(PATH, data=json.dumps(body), headers={"Stripe-Signature": "t=1,v1=00"})
    assert r.status_code == 401 and r.json == {"error": NOT_VERIFIED}
    assert stored_count(db) == 0
    assert entitlement(client, workspace, "user-7") == {"active": False, "source": "none"}


def test_a_created_subscription_makes_its_metadata_user_active_and_deleting_it_ends_access_at_once(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    now = int(time.time())
    r = post_event(
        client, integration_id, event("customer.subscription.created", subscription("active"), event_id="evt_1")
    )
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "web"}
    assert entitlement(client, workspace, "user-8")["active"] is False

    # The same event again (Stripe retries): acknowledged, applied once.
    again = post_event(
        client, integration_id, event("customer.subscription.created", subscription("active"), event_id="evt_1")
    )
    assert again.status_code == 200 and again.json["status"] == "duplicate"

    # Deleted later the same period: no access from now on, without waiting for the period's end.
    deleted = subscription("canceled", canceled_at=now, ended_at=now)
    r = post_event(
        client, integration_id, event("customer.subscription.deleted", deleted, event_id="evt_2", created=now + 1)
    )
    assert r.status_code == 200 and r.json["status"] == "applied"
    assert entitlement(client, workspace, "user-7") == {"active": False, "source": "web"}
    cancellations = [e for e in landed(db) if e["event_type"] == "cancellation"]
    assert [e["event_id"] for e in cancellations] == [f"stripe:sub_1:{now}:cancellation"]


def test_past_due_keeps_access_until_the_period_end_and_unpaid_ends_it(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    now = int(time.time())
    created = event("customer.subscription.created", subscription("active"), event_id="evt_1", created=now - 30)
    post_event(client, integration_id, created)
    # The renewal failed: Stripe already moved the period on, and retries the payment.
    past_due = subscription("past_due", period_end=now + 3 * 86400)
    r = post_event(
        client, integration_id, event("customer.subscription.updated", past_due, event_id="evt_2", created=now - 20)
    )
    assert r.status_code == 200
    assert entitlement(client, workspace, "user-7")["active"] is True
    # Stripe gave up on the payment.
    unpaid = event("customer.subscription.updated", subscription("unpaid"), event_id="evt_3", created=now - 10)
    r = post_event(client, integration_id, unpaid)
    assert entitlement(client, workspace, "user-7")["active"] is False


def test_a_paid_invoice_lands_revenue_for_the_subscriptions_user_in_major_units(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    post_event(client, integration_id, event("customer.subscription.created", subscription("active"), event_id="evt_1"))
    now = int(time.time())
    invoice = {
        "id": "in_1",
        "object": "invoice",
        "customer": "cus_1",
        "livemode": True,
        "status": "paid",
        "amount_paid": 1299,
        "currency": "eur",
        "billing_reason": "subscription_create",
        "created": now,
        "status_transitions": {"paid_at": now},
        # API 2025-03-31: the subscription is named under parent.subscription_details.
        "parent": {"type": "subscription_details", "subscription_details": {"subscription": "sub_1", "metadata": {}}},
    }
    r = post_event(client, integration_id, event("invoice.paid", invoice, event_id="evt_2"))
    assert r.status_code == 200 and r.json["events_landed"] == 1
    yen = invoice | {"id": "in_2", "amount_paid": 1200, "currency": "jpy", "billing_reason": "subscription_cycle"}
    post_event(client, integration_id, event("invoice.paid", yen, event_id="evt_3"))
    revenue = {e["event_id"]: e for e in landed(db) if e["event_type"] in ("subscription_start", "renewal")}
    assert {"revenue": 12.99, "currency": "EUR"}.items() <= revenue["stripe:in_1:subscription_start"][
        "properties"
    ].items()
    assert revenue["stripe:in_1:subscription_start"]["user_id"] == "user-7"
    assert revenue["stripe:in_2:renewal"]["properties"]["revenue"] == 1200.0  # JPY has no minor unit
    assert revenue["stripe:in_2:renewal"]["source"] == "payment_processor"


def test_a_refunded_charge_lands_a_negative_refund_and_revokes_a_one_time_purchase(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    now = int(time.time())
    one_time = one_time_invoice("in_9", at=now, payment_intent="pi_9")
    r = post_event(client, integration_id, event("invoice.paid", one_time, event_id="evt_1", created=now - 60))
    assert r.status_code == 200
    assert entitlement(client, workspace, "user-9") == {"active": True, "source": "web"}
    charge = refunded_charge("ch_9", payment_intent="pi_9", at=now - 60)
    r = post_event(client, integration_id, event("charge.refunded", charge, event_id="evt_2", created=now - 5))
    assert r.status_code == 200 and r.json["status"] == "applied"
    assert entitlement(client, workspace, "user-9")["active"] is False
    refunds = [e for e in landed(db) if e["event_type"] == "refund"]
    assert len(refunds) == 1
    assert refunds[0]["event_id"] == "stripe:ch_9:refund" and refunds[0]["user_id"] == "user-9"
    assert refunds[0]["properties"]["revenue"] == -49.99 and refunds[0]["properties"]["currency"] == "USD"


def test_other_event_types_are_stored_and_acknowledged_with_nothing_applied(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    r = post_event(
        client, integration_id, event("customer.created", {"id": "cus_1", "object": "customer"}, event_id="evt_1")
    )
    assert r.status_code == 200 and r.json["purchases_changed"] == 0 and r.json["events_landed"] == 0
    assert stored_count(db) == 1


def test_without_subscription_metadata_the_user_comes_from_the_customer_read_from_stripe(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    api = localstripe()
    stripe_api = stripe.StripeClient("sk_test_localstripe", base_addresses={"api": api})
    customer = stripe_api.v1.customers.create(params={"metadata": {"flokit_user_id": "user-42"}})
    config = {"secret_key": "sk_test_localstripe", "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": api})
    anonymous = subscription("active", customer=customer.id, metadata={})
    r = post_event(client, integration_id, event("customer.subscription.created", anonymous, event_id="evt_1"))
    assert r.status_code == 200, r.json
    assert entitlement(client, workspace, "user-42") == {"active": True, "source": "web"}
    # A customer Stripe does not know: applied unlinked (a later statement naming the user links it).
    unknown = subscription("active", customer="cus_nobody", metadata={}) | {"id": "sub_2"}
    r = post_event(client, integration_id, event("customer.subscription.created", unknown, event_id="evt_2"))
    assert r.status_code == 200 and r.json["status"] == "applied"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/notifications.py")
def test_stripe_unreachable_for_the_customer_lookup_is_502_so_stripe_retries(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    config = {"secret_key": "sk_test_x", "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    closed = f"http://127.0.0.1:{free_port()}"
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": closed})
    anonymous = subscription("active", customer="cus_1", metadata={})
    r = post_event(client, integration_id, event("customer.subscription.created", anonymous, event_id="evt_1"))
    assert r.status_code == 502
    assert entitlement(client, workspace, "user-7")["active"] is False


def test_a_replay_applies_stored_events_again_long_after_their_signature_expired(
    client: FlaskClient, db: Database, workspace: dict, settings: Settings
) -> None:
    integration_id = integration(db, workspace)
    since = datetime.now(UTC) - timedelta(minutes=1)
    post_event(client, integration_id, event("customer.subscription.created", subscription("active"), event_id="evt_1"))
    # Replay decodes the stored bytes without the signature's 5-minute tolerance.
    result = replay(Context(settings, db), provider="payment_processor", since=since)
    assert (result.applied, result.failed) == (1, 0), result.errors
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "web"}
    assert stored_count(db) == 1


def _grants(db: Database, workspace: dict[str, Any], user: str) -> list[str]:
    with db.read() as conn:
        rows = ledger.grants_of(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user)
    return [r.store_key for r in rows]


def test_a_one_time_purchase_whose_invoice_names_no_payment_intent_is_revoked_by_its_charges_refund(
    client: FlaskClient, db: Database, workspace: dict, stripe_fake: StripeFake
) -> None:
    """API versions since 2025-03-31: the invoice in `invoice.paid` has no `payment_intent`; the
    handler reads the invoice's payments from Stripe, so the grant is the PaymentIntent's, the
    one the refunded charge names."""
    config = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": stripe_fake.url})
    now = int(time.time())
    basil = one_time_invoice("in_9", at=now - 60)
    assert "payment_intent" not in basil and "payments" not in basil
    stripe_fake.lists["invoice_payments"] = [
        invoice_payment("inpay_other", invoice="in_8", payment_intent="pi_8", at=now - 90),
        invoice_payment("inpay_9", invoice="in_9", payment_intent="pi_9", at=now - 60),
    ]
    r = post_event(client, integration_id, event("invoice.paid", basil, event_id="evt_1", created=now - 60))
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-9") == {"active": True, "source": "web"}
    assert _grants(db, workspace, "user-9") == ["pi_9"]
    assert [p for p in stripe_fake.paths("/v1/invoice_payments") if "invoice=in_9" in p]

    refunded = refunded_charge("ch_9", payment_intent="pi_9", at=now - 60)
    r = post_event(client, integration_id, event("charge.refunded", refunded, event_id="evt_2", created=now - 5))
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-9")["active"] is False
    assert [(e["event_id"], e["user_id"]) for e in landed(db) if e["event_type"] in ("purchase", "refund")] == [
        ("stripe:in_9:purchase", "user-9"),
        ("stripe:ch_9:refund", "user-9"),
    ]


def test_stripe_unreachable_for_the_invoices_payments_is_502_and_nothing_is_granted(
    client: FlaskClient, db: Database, workspace: dict, stripe_fake: StripeFake
) -> None:
    config = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    closed = f"http://127.0.0.1:{free_port()}"
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": closed})
    now = int(time.time())
    r = post_event(client, integration_id, event("invoice.paid", one_time_invoice("in_9", at=now), event_id="evt_1"))
    assert r.status_code == 502
    assert entitlement(client, workspace, "user-9")["active"] is False and landed(db) == []


def test_stripe_refusing_the_invoices_payments_is_502_too(
    client: FlaskClient, db: Database, workspace: dict, stripe_fake: StripeFake
) -> None:
    config = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": stripe_fake.url})
    stripe_fake.key = "sk_live_rolled_since"  # the key was rolled in Stripe's dashboard
    r = post_event(
        client, integration_id, event("invoice.paid", one_time_invoice("in_9", at=int(time.time())), event_id="e")
    )
    assert r.status_code == 502 and "Invalid API Key" in r.json["error"]
    assert entitlement(client, workspace, "user-9")["active"] is False


def test_a_one_time_purchase_whose_invoice_names_no_user_is_linked_through_its_customer(
    client: FlaskClient, db: Database, workspace: dict, stripe_fake: StripeFake
) -> None:
    config = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": stripe_fake.url})
    now = int(time.time())
    stripe_fake.customers["cus_9"] = {"id": "cus_9", "object": "customer", "metadata": {"flokit_user_id": "user-9"}}
    stripe_fake.lists["invoice_payments"] = [invoice_payment("inpay_9", invoice="in_9", payment_intent="pi_9", at=now)]
    anonymous = one_time_invoice("in_9", at=now, metadata={})  # an event sends the customer as its id
    r = post_event(client, integration_id, event("invoice.paid", anonymous, event_id="evt_1"))
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-9") == {"active": True, "source": "web"}
    assert [e["user_id"] for e in landed(db)] == ["user-9"]
    assert stripe_fake.paths("/v1/customers/cus_9")


def test_a_subscription_charges_refund_names_its_subscription_and_invoice_read_from_stripe(
    client: FlaskClient, db: Database, workspace: dict, stripe_fake: StripeFake
) -> None:
    """API versions since 2025-03-31: a charge names no invoice; its PaymentIntent's
    InvoicePayment names the invoice, whose parent names the subscription, so the refund lands
    with the ledger's key of the purchase (what subscription metrics join on) and its user."""
    config = {"secret_key": KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "payment_processor", config | {"base_url": stripe_fake.url})
    now = int(time.time())
    created = event("customer.subscription.created", subscription("active"), event_id="evt_1", created=now - 120)
    assert post_event(client, integration_id, created).status_code == 200
    paid = subscription_invoice("in_s", at=now - 100, billing_reason="subscription_create")
    stripe_fake.lists["invoices"] = [paid]
    stripe_fake.lists["invoice_payments"] = [invoice_payment("inpay_s", invoice="in_s", payment_intent="pi_s", at=now)]
    assert post_event(client, integration_id, event("invoice.paid", paid, event_id="evt_2")).status_code == 200
    charge = refunded_charge("ch_s", payment_intent="pi_s", at=now - 100, customer="cus_1")
    r = post_event(client, integration_id, event("charge.refunded", charge, event_id="evt_3", created=now - 5))
    assert r.status_code == 200 and r.json["events_landed"] == 1, r.json
    by_type = {e["event_type"]: e for e in landed(db)}
    refund = by_type["refund"]
    assert refund["user_id"] == "user-7"
    assert (refund["properties"]["purchase_key"], refund["properties"]["transaction_id"]) == ("sub_1", "in_s")
    assert by_type["subscription_start"]["properties"]["purchase_key"] == "sub_1"
    asked = stripe_fake.paths("/v1/invoice_payments")
    assert [p for p in asked if "payment%5Bpayment_intent%5D=pi_s" in p], asked
    assert stripe_fake.paths("/v1/invoices/in_s")
