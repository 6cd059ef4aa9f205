"""Stripe objects to facts and events: the statuses, both API versions' period fields, money in
each currency's minor unit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from transforms.purchases import payment_processor as s

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)
T = int(NOW.timestamp())


def sub(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "sub_1",
        "status": status,
        "livemode": True,
        "metadata": {},
        "customer": "cus_1",
        "current_period_start": T - 86400,
        "current_period_end": T + 29 * 86400,
        "items": {"data": [{"price": {"id": "price_1", "product": {"id": "prod_pro", "object": "product"}}}]},
        **extra,
    }


def test_active_grants_to_the_period_end_and_the_user_comes_from_metadata_else_the_expanded_customer() -> None:
    fact = s.subscription_fact(sub("active", metadata={"flokit_user_id": "u1"}), stated_at=NOW)
    assert fact is not None and fact.active_at(NOW) and not fact.active_at(NOW + timedelta(days=30))
    assert (fact.user_hint, fact.product_id, fact.channel, fact.auto_renew) == ("u1", "prod_pro", "web", True)
    expanded = sub("active", customer={"id": "cus_1", "metadata": {"flokit_user_id": "u2"}})
    assert s.subscription_fact(expanded, stated_at=NOW).user_hint == "u2"  # type: ignore[union-attr]
    assert s.subscription_fact(sub("active"), stated_at=NOW).user_hint is None  # type: ignore[union-attr]


def test_newer_api_versions_period_on_the_items_is_read() -> None:
    moved = sub("active")
    del moved["current_period_start"], moved["current_period_end"]
    moved["items"]["data"][0] |= {"current_period_start": T - 86400, "current_period_end": T + 6 * 86400}
    fact = s.subscription_fact(moved, stated_at=NOW)
    assert fact is not None and fact.expires_at == NOW + timedelta(days=6)


def test_past_due_is_a_grace_period_to_the_period_end_and_the_ending_statuses_grant_nothing() -> None:
    fact = s.subscription_fact(sub("past_due"), stated_at=NOW)
    assert fact is not None and fact.expires_at == NOW - timedelta(days=1)
    assert fact.grace_ends_at == NOW + timedelta(days=29) and fact.active_at(NOW + timedelta(days=28))
    for status in ("canceled", "unpaid", "incomplete_expired", "incomplete", "paused"):
        ended = s.subscription_fact(sub(status), stated_at=NOW)
        assert ended is not None and not ended.active_at(NOW), status


def test_trialing_is_a_trial_to_its_end_and_cancel_at_period_end_turns_auto_renew_off() -> None:
    trial = s.subscription_fact(sub("trialing", trial_end=T + 7 * 86400), stated_at=NOW)
    assert trial is not None and trial.in_trial and trial.expires_at == NOW + timedelta(days=7)
    leaving = s.subscription_fact(sub("active", cancel_at_period_end=True), stated_at=NOW)
    assert leaving is not None and leaving.auto_renew is False and leaving.active_at(NOW)


@pytest.mark.parametrize(
    ("amount", "currency", "major"), [(1299, "usd", 12.99), (1200, "jpy", 1200.0), (1500, "bhd", 1.5)]
)
def test_amounts_are_read_in_each_currencys_minor_unit(amount: int, currency: str, major: float) -> None:
    assert s.major_units(amount, currency) == major


def invoice(**extra: Any) -> dict[str, Any]:
    return {
        "id": "in_1",
        "livemode": True,
        "status": "paid",
        "amount_paid": 999,
        "currency": "usd",
        "billing_reason": "subscription_cycle",
        "subscription": "sub_1",
        "status_transitions": {"paid_at": T},
        **extra,
    }


def test_a_paid_invoice_is_a_renewal_or_start_and_free_or_test_mode_ones_land_nothing() -> None:
    [renewal] = s.invoice_events(invoice(), workspace_id="ws", user_id="u1", received_at=NOW)
    assert (renewal.event_id, renewal.event_type, renewal.occurred_at) == ("stripe:in_1:renewal", "renewal", NOW)
    assert renewal.properties["revenue"] == 9.99 and renewal.properties["currency"] == "USD"
    [start] = s.invoice_events(
        invoice(billing_reason="subscription_create"), workspace_id="ws", user_id=None, received_at=NOW
    )
    assert start.event_type == "subscription_start"
    assert s.invoice_events(invoice(amount_paid=0), workspace_id="ws", user_id=None, received_at=NOW) == []
    assert s.invoice_events(invoice(livemode=False), workspace_id="ws", user_id=None, received_at=NOW) == []


def test_subscription_lifecycle_events_trial_conversion_and_one_cancellation_per_request() -> None:
    created = sub("trialing", trial_start=T, trial_end=T + 7 * 86400, livemode=True)
    [trial] = s.subscription_events(
        created,
        stripe_type="customer.subscription.created",
        previous=None,
        workspace_id="ws",
        user_id="u",
        received_at=NOW,
    )
    assert trial.event_id == "stripe:sub_1:trial_start"
    converted = sub("active", trial_end=T)
    [conv] = s.subscription_events(
        converted,
        stripe_type="customer.subscription.updated",
        previous={"status": "trialing"},
        workspace_id="ws",
        user_id="u",
        received_at=NOW,
    )
    assert conv.event_type == "trial_converted" and "revenue" not in conv.properties
    off = sub("active", cancel_at_period_end=True, canceled_at=T)
    for kind in ("customer.subscription.updated", "customer.subscription.deleted"):
        [cancel] = s.subscription_events(
            off, stripe_type=kind, previous=None, workspace_id="ws", user_id="u", received_at=NOW
        )
        assert cancel.event_id == f"stripe:sub_1:{T}:cancellation"


def test_a_refund_is_negative_and_long_ids_are_hashed_to_the_lakes_limit() -> None:
    charge = {
        "id": "ch_1",
        "livemode": True,
        "amount_refunded": 500,
        "currency": "eur",
        "refunds": {"data": [{"created": T}]},
    }
    [refund] = s.refund_events(
        charge, workspace_id="ws", user_id=None, received_at=NOW, stated_at=NOW + timedelta(hours=1)
    )
    assert refund.properties["revenue"] == -5.0 and refund.occurred_at == NOW
    long_id = s.event_id("x" * 100, "refund")
    assert len(long_id) <= 80 and long_id.startswith("stripe:") and long_id.endswith(":refund")


def paid(payment_id: str, created: int, *, default: bool = False, status: str = "paid", **payment: Any) -> dict:
    return {"id": payment_id, "status": status, "created": created, "is_default": default, "payment": payment}


def test_a_one_time_purchase_is_keyed_by_the_payment_intent_a_refund_names_whatever_the_api_version() -> None:
    older = {"id": "in_9", "status": "paid", "livemode": True, "payment_intent": "pi_9"}
    newer = {"id": "in_9", "status": "paid", "livemode": True}  # 2025-03-31 on: no payment_intent, no charge
    expanded = newer | {
        "payments": {"data": [paid("inpay_9", T, default=True, type="payment_intent", payment_intent="pi_9")]}
    }
    listed = [paid("inpay_9", T, default=True, type="payment_intent", payment_intent={"id": "pi_9"})]
    assert not s.needs_payments(older) and not s.needs_payments(expanded) and s.needs_payments(newer)
    keys = {
        s.purchase_fact(older, stated_at=NOW).store_key,  # type: ignore[union-attr]
        s.purchase_fact(expanded, stated_at=NOW).store_key,  # type: ignore[union-attr]
        s.purchase_fact(newer, stated_at=NOW, payments=listed).store_key,  # type: ignore[union-attr]
        s.one_time_key({"id": "ch_9", "payment_intent": "pi_9"}),  # the refunded charge
    }
    assert keys == {"pi_9"}
    # A charge without a PaymentIntent: Stripe surfaces the charge, which its refund names too.
    by_charge = [paid("inpay_1", T, type="charge", charge="ch_1")]
    assert s.purchase_fact(newer, stated_at=NOW, payments=by_charge).store_key == s.one_time_key({"id": "ch_1"})  # type: ignore[union-attr]


def test_among_several_payments_every_reader_picks_the_same_one() -> None:
    payments = [
        paid("inpay_3", T + 20, type="payment_intent", payment_intent="pi_late"),
        paid("inpay_0", T - 50, status="canceled", type="payment_intent", payment_intent="pi_canceled"),
        paid("inpay_2", T + 10, type="payment_intent", payment_intent="pi_early"),
    ]
    assert s.payment_key(payments) == s.payment_key(payments[::-1]) == "pi_early"  # the earliest paid
    default = paid("inpay_9", T + 30, default=True, type="payment_intent", payment_intent="pi_default")
    assert s.payment_key([*payments, default]) == "pi_default"  # the one Stripe made on finalizing


def test_the_invoice_id_keys_a_purchase_only_when_stripe_reports_no_refundable_payment() -> None:
    newer = {"id": "in_9", "status": "paid", "livemode": True}
    out_of_band = [paid("inpay_1", T, type="payment_record", payment_record="pr_1")]
    for payments in ([], out_of_band):
        assert s.purchase_fact(newer, stated_at=NOW, payments=payments).store_key == "in_9"  # type: ignore[union-attr]


def priced(status: str, *, amount: int = 999, currency: str = "usd", interval: str = "month", count: int = 1,
           quantity: int = 1, **extra: Any) -> dict[str, Any]:  # fmt: skip
    price = {
        "id": "price_1", "product": "prod_pro", "unit_amount": amount, "currency": currency,
        "recurring": {"interval": interval, "interval_count": count},
    }  # fmt: skip
    return sub(status, items={"data": [{"price": price, "quantity": quantity}]}, **extra)


def test_an_active_subscription_states_its_list_price_and_billing_period() -> None:
    fact = s.subscription_fact(priced("active", quantity=2), stated_at=NOW)
    assert fact is not None
    assert (fact.price_amount, fact.price_currency, fact.priced_at) == (19.98, "USD", NOW - timedelta(days=1))
    assert fact.billing_period == "P1M"
    yen = s.subscription_fact(priced("active", amount=12000, currency="jpy", interval="year"), stated_at=NOW)
    assert yen is not None and (yen.price_amount, yen.price_currency, yen.billing_period) == (12000.0, "JPY", "P1Y")
    weeks = s.subscription_fact(priced("active", interval="week", count=2), stated_at=NOW)
    assert weeks is not None and weeks.billing_period == "P2W"
    # A trial has no price (its period is named); past_due has not paid the current period.
    trial = s.subscription_fact(priced("trialing", trial_end=T + 7 * 86400), stated_at=NOW)
    assert trial is not None and (trial.price_amount, trial.price_currency, trial.billing_period) == (None, None, "P1M")
    due = s.subscription_fact(priced("past_due"), stated_at=NOW)
    assert due is not None and due.price_amount is None
    metered = s.subscription_fact(sub("active"), stated_at=NOW)  # a price without unit_amount
    assert metered is not None and (metered.price_amount, metered.billing_period) == (None, None)


def test_lifecycle_events_name_the_subscription_and_a_periods_end() -> None:
    created = priced("trialing", trial_start=T, trial_end=T + 7 * 86400)
    [trial] = s.subscription_events(
        created, stripe_type="customer.subscription.created", previous=None, workspace_id="ws", user_id="u",
        received_at=NOW,
    )  # fmt: skip
    assert trial.properties["purchase_key"] == "sub_1"
    assert (trial.properties["period_ends_at"], trial.properties["billing_period"]) == (
        "2026-05-08T12:00:00.000Z", "P1M",
    )  # fmt: skip
    converted = priced("active", trial_end=T)
    [conv] = s.subscription_events(
        converted, stripe_type="customer.subscription.updated", previous={"status": "trialing"}, workspace_id="ws",
        user_id="u", received_at=NOW,
    )  # fmt: skip
    assert (
        conv.properties["period_ends_at"] == "2026-05-30T12:00:00.000Z" and conv.properties["purchase_key"] == "sub_1"
    )
    off = sub("active", cancel_at_period_end=True, canceled_at=T)
    [cancel] = s.subscription_events(
        off, stripe_type="customer.subscription.updated", previous=None, workspace_id="ws", user_id="u",
        received_at=NOW,
    )  # fmt: skip
    assert cancel.properties["purchase_key"] == "sub_1" and "period_ends_at" not in cancel.properties


def test_a_paid_invoice_names_its_subscription_invoice_and_the_period_it_pays() -> None:
    line = {
        "period": {"start": T, "end": T + 365 * 86400},
        "price": {"id": "price_y", "recurring": {"interval": "year", "interval_count": 1}},
    }
    paid_invoice = invoice(amount_paid=12000, currency="jpy", lines={"data": [line]})
    [renewal] = s.invoice_events(paid_invoice, workspace_id="ws", user_id="u1", received_at=NOW)
    assert (renewal.properties["purchase_key"], renewal.properties["transaction_id"]) == ("sub_1", "in_1")
    assert renewal.properties["period_ends_at"] == "2027-05-01T12:00:00.000Z"
    assert (renewal.properties["billing_period"], renewal.properties["revenue"]) == ("P1Y", 12000.0)
    # API 2025-03-31 on: a line names its price by id only, so no billing period.
    newer = invoice(lines={"data": [{"period": {"end": T + 30 * 86400}, "pricing": {"price_details": {"price": "p"}}}]})
    [cycle] = s.invoice_events(newer, workspace_id="ws", user_id="u1", received_at=NOW)
    assert "billing_period" not in cycle.properties and cycle.properties["period_ends_at"] == "2026-05-31T12:00:00.000Z"
    one_time = {"id": "in_9", "status": "paid", "livemode": True, "amount_paid": 500, "currency": "eur",
                "created": T, "payment_intent": "pi_9"}  # fmt: skip
    [bought] = s.invoice_events(one_time, workspace_id="ws", user_id="u1", received_at=NOW, purchase_key="pi_9")
    assert bought.event_type == "purchase" and bought.properties["purchase_key"] == "pi_9"
    assert "period_ends_at" not in bought.properties


class Ledger:
    """`Reads` over a literal ledger and literal Stripe invoices (with the InvoicePayments that
    name their PaymentIntents); `asked` records what Stripe was asked."""

    def __init__(self, grants: dict[str, dict[str, Any]], invoices: dict[str, dict[str, Any]] | None = None) -> None:
        self.grants, self.invoices = grants, invoices or {}
        self.asked: list[str] = []

    def invoice(self, invoice_id: str) -> dict[str, Any] | None:
        self.asked.append(invoice_id)
        return self.invoices.get(invoice_id)

    def payment_invoice(self, payment_intent: str) -> str | None:
        self.asked.append(payment_intent)
        return next((i for i, inv in self.invoices.items() if inv.get("paid_by") == payment_intent), None)

    def linked_user(self, subscription_id: str) -> str | None:
        return None

    def customer_user(self, customer_id: str) -> str | None:
        return None

    def grant(self, store_key: str) -> dict[str, Any] | None:
        return self.grants.get(store_key)

    def invoice_payments(self, invoice_id: str) -> list[dict[str, Any]]:
        return []


def refund_of(charge: dict[str, Any], reads: Ledger) -> dict[str, Any]:
    effects = s.event_effects(
        "charge.refunded", charge, previous=None, stated_at=NOW, received_at=NOW, workspace_id="ws", app_id="app",
        reads=reads,
    )  # fmt: skip
    found = [e for effect in effects.effects for e in effect.events("u1")] + list(effects.events)
    [refund] = found
    return refund.properties


def test_a_refund_names_its_purchase_and_the_refunded_invoice_when_known() -> None:
    charge = {"id": "ch_1", "livemode": True, "amount_refunded": 999, "currency": "usd", "refunded": True,
              "payment_intent": "pi_9", "invoice": "in_7"}  # fmt: skip
    held = {"pi_9": {"user_id": "u1", "product_id": "lifetime", "kind": "lifetime", "environment": "production"}}
    one_time = refund_of(charge, Ledger(held))
    assert (one_time["purchase_key"], one_time["transaction_id"], one_time["revenue"]) == ("pi_9", "in_7", -9.99)
    # A subscription's charge: the ledger holds no purchase under its PaymentIntent; an expanded
    # invoice names the subscription, an invoice id only the refunded transaction.
    expanded = charge | {"payment_intent": "pi_2", "invoice": {"id": "in_8", "subscription": "sub_1"}}
    assert (refund_of(expanded, Ledger({}))["purchase_key"], refund_of(expanded, Ledger({}))["transaction_id"]) == (
        "sub_1", "in_8",
    )  # fmt: skip
    bare = refund_of(charge | {"payment_intent": "pi_2"}, Ledger({}))
    assert "purchase_key" not in bare and bare["transaction_id"] == "in_7"  # Stripe knows no in_7


def test_a_subscription_charges_refund_finds_its_subscription_through_stripe() -> None:
    """Before 2025-03-31 the charge names its invoice; since, only its PaymentIntent, whose
    InvoicePayment names the invoice: either way the invoice read from Stripe names the
    subscription, the refund's `purchase_key` (and its linked user)."""
    invoices = {
        "in_7": {"id": "in_7", "paid_by": "pi_2", "parent": {"subscription_details": {"subscription": "sub_1"}}}
    }
    older = {"id": "ch_1", "livemode": True, "amount_refunded": 999, "currency": "usd", "payment_intent": "pi_2",
             "invoice": "in_7"}  # fmt: skip
    reads = Ledger({}, invoices)
    assert (refund_of(older, reads)["purchase_key"], refund_of(older, reads)["transaction_id"]) == ("sub_1", "in_7")
    newer = {k: v for k, v in older.items() if k != "invoice"}
    reads = Ledger({}, invoices)
    props = refund_of(newer, reads)
    assert (props["purchase_key"], props["transaction_id"]) == ("sub_1", "in_7") and reads.asked == ["pi_2", "in_7"]
    test_mode = Ledger({}, invoices)
    s.event_effects("charge.refunded", newer | {"livemode": False}, previous=None, stated_at=NOW, received_at=NOW,
                    workspace_id="ws", app_id="app", reads=test_mode)  # fmt: skip
    assert test_mode.asked == []  # no refund lands, nothing is asked
