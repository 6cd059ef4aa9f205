"""`payment_processor` (Stripe): events to `StoreFact`s and canonical events, pure, no I/O.

What is read, as Stripe's API reference describes the objects (stripe-python 16.1 types):

- A Subscription: `id`, `status` (`incomplete`, `incomplete_expired`, `trialing`, `active`,
  `past_due`, `canceled`, `unpaid`, `paused`), `current_period_start` / `current_period_end`
  (API versions since 2025-03-31 moved them to each item: `items.data[].current_period_*`;
  both are read), `trial_end`, `cancel_at_period_end`, `canceled_at`, `ended_at`, `metadata`,
  `customer` (an id, or the Customer when expanded), `livemode`.
- An Invoice: `id`, `status`, `amount_paid` (minor units), `currency`, `billing_reason`
  (`subscription_create`, `subscription_cycle`, ...), the subscription it bills (`subscription`
  in older API versions, `parent.subscription_details.subscription` in newer ones, with the
  subscription's `metadata` beside it), `status_transitions.paid_at`, `lines`, and what paid
  it: `payment_intent` / `charge` before 2025-03-31; since then (the "basil" versions) neither
  field exists, and the payments are InvoicePayments (`payment.payment_intent`), in the invoice
  only when expanded (`payments`; not in events nor lists) and at `GET /v1/invoice_payments`.
- A Charge: `id`, `payment_intent`, `amount_refunded`, `refunded` (fully), `currency`,
  `metadata`, `created`.

Conventions FloKit sets (README, "Stripe"):
- **The buyer**: the FloKit user id is `metadata.flokit_user_id` on the Subscription (set it
  when creating the Checkout Session: `subscription_data.metadata`), else on the Customer
  (read when Stripe sends the Customer expanded, or by the handler from the API). A purchase
  linked to a user stays linked: later events find it by the subscription id.
- **Access by status**: `trialing` and `active` grant until the current period's end.
  `past_due` (a renewal payment failed; Stripe retries it) keeps access until the current
  period's end as a grace period: the paid access ended at the period's start, the grace at
  its end, unless Stripe gives up sooner (`unpaid` or `canceled`, which end access at once).
  `canceled`, `unpaid`, `incomplete`, `incomplete_expired` and `paused` grant nothing: access
  ends at `ended_at` (else when the event was created).
- `cancel_at_period_end` (or a `cancel_at`): auto-renew off, access until the period's end.
- **A one-time purchase** (a paid invoice without a subscription) is a lifetime grant keyed by
  the PaymentIntent that paid it, whatever the API version of the reader: a refund
  (`charge.refunded`, the refunds list) names only the charge's `payment_intent`. Where the
  invoice in hand does not name it, the reader asks Stripe for the invoice's payments; only an
  invoice Stripe reports no such payment for is keyed by its own id (nothing can refund it).
  Its buyer: the invoice's `metadata.flokit_user_id` (Checkout's
  `invoice_creation.invoice_data.metadata`), else the Customer's, as for a subscription.

What an event changes (`event_effects`) is decided here, for the webhook handler and the sync
alike (`orchestration/syncs/connectors/payment_processor.py` maps the objects it lists as the
events of the same objects), given what they read (`Reads`: the ledger, a Customer, an
invoice's payments).

Canonical events (ids `stripe:<object id>:<type>`, deterministic so the sync's later reading of
the same objects lands once):
- a paid invoice with `amount_paid` > 0: `subscription_start` (`billing_reason`
  `subscription_create`), `renewal` (any other reason on a subscription), `purchase` (an
  invoice without a subscription), with `amount_paid` in major units (zero-decimal currencies
  such as JPY are not divided, three-decimal ones by 1000) and the currency;
- a subscription created `trialing`: `trial_start`; updated from `trialing` to `active`:
  `trial_converted` (no amount: the invoice that pays the period books it, as a `renewal`,
  because an invoice alone does not say that it ended a trial);
- auto-renew turned off or a subscription canceled: one `cancellation`, named by the
  subscription and its `canceled_at`;
- a refunded charge: `refund` with the refunded amount negative, `stripe:<charge id>:refund`
  (one per charge: a second partial refund of the same charge is left to the sync).

What subscription metrics read (issue 34): every event names its purchase as `purchase_key`, the
ledger's `store_key` (the subscription id; a one-time purchase's PaymentIntent key), and a paid
invoice's event its `transaction_id` (the invoice id). A refund names the purchase the ledger
holds under the charge's PaymentIntent (a one-time purchase), else the subscription of the
invoice the charge paid: expanded in the charge, else read from Stripe (`Reads.invoice`, by
the charge's `invoice` before 2025-03-31, by its PaymentIntent's InvoicePayment since:
`Reads.payment_invoice`), and that invoice as the refunded `transaction_id`; without a
`secret_key` nothing is asked and the refund lands without them. Period events carry
`period_ends_at` (the invoice line's `period.end`; a trial's `trial_end`; a converted trial's
current period end) and `billing_period` from the price's `recurring` (`interval`,
`interval_count`) as ISO 8601 where the object in hand carries the price. The subscription's
fact states its items' list price (`unit_amount` times `quantity`, before discounts and tax)
at the current period's start while `active` (a paid period); a trial, `past_due` and the
ending statuses state none, so the ledger keeps the price it held.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from transforms import event_types as t
from transforms.currencies import stripe_exponent
from transforms.entitlements.effects import Effect, Effects
from transforms.entitlements.facts import PAYMENT_PROCESSOR, StoreFact
from transforms.events import CanonicalEvent, lake_can_hold
from transforms.timefmt import iso_z

ID_PREFIX = "stripe"
MAX_EVENT_ID = 80
USER_METADATA_KEY = "flokit_user_id"

ACCESS_STATUSES = frozenset({"trialing", "active"})
# A price's `recurring.interval` as the ISO 8601 unit of its billing period.
INTERVALS = {"day": "D", "week": "W", "month": "M", "year": "Y"}
GRACE_STATUSES = frozenset({"past_due"})
# Handled event types; anything else is stored and acknowledged without an effect.
SUBSCRIPTION_EVENTS = frozenset(
    {
        "customer.subscription.created",
        "customer.subscription.updated",
        "customer.subscription.deleted",
        "customer.subscription.trial_will_end",
        "customer.subscription.paused",
        "customer.subscription.resumed",
    }
)
INVOICE_EVENTS = frozenset({"invoice.paid", "invoice.payment_failed"})
CHARGE_EVENTS = frozenset({"charge.refunded"})
# The types that change something (`event_effects`): what the sync asks `GET /v1/events` for.
APPLIED_EVENTS = SUBSCRIPTION_EVENTS | {"invoice.paid"} | CHARGE_EVENTS


def moment(seconds: object) -> datetime | None:
    """Stripe's times are Unix seconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


def event_id(raw: str, event_type: str) -> str:
    """`stripe:<raw>:<type>`, the raw id hashed when the whole would exceed the lake's 80."""
    full = f"{ID_PREFIX}:{raw}:{event_type}"
    if len(full) <= MAX_EVENT_ID:
        return full
    return f"{ID_PREFIX}:{hashlib.sha256(raw.encode('utf-8')).hexdigest()[:40]}:{event_type}"


def major_units(amount: int, currency: str) -> float:
    """An amount in Stripe's minor units as the currency's major units (`transforms.currencies`)."""
    return amount / 10 ** stripe_exponent(currency)


def _id(value: object) -> str | None:
    """An id field that Stripe sends as the id or, expanded, as the object."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, Mapping) and isinstance(value.get("id"), str) and value["id"]:
        return str(value["id"])
    return None


def _metadata_user(obj: object) -> str | None:
    if not isinstance(obj, Mapping):
        return None
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        user = metadata.get(USER_METADATA_KEY)
        if isinstance(user, str) and user.strip():
            return user.strip()
    return None


def subscription_user(subscription: Mapping[str, Any]) -> str | None:
    """The FloKit user: the subscription's metadata, else the (expanded) customer's."""
    return _metadata_user(subscription) or _metadata_user(subscription.get("customer"))


def customer_id(obj: Mapping[str, Any]) -> str | None:
    return _id(obj.get("customer"))


def _items(subscription: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = subscription.get("items")
    data = items.get("data") if isinstance(items, Mapping) else None
    return [i for i in data if isinstance(i, Mapping)] if isinstance(data, list) else []


def period(subscription: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """The current period: the subscription's own fields (API versions before 2025-03-31), else
    its items' (the earliest start, the latest end)."""
    start = moment(subscription.get("current_period_start"))
    end = moment(subscription.get("current_period_end"))
    if start is not None and end is not None:
        return start, end
    starts = [s for s in (moment(i.get("current_period_start")) for i in _items(subscription)) if s is not None]
    ends = [e for e in (moment(i.get("current_period_end")) for i in _items(subscription)) if e is not None]
    return (start or (min(starts) if starts else None)), (end or (max(ends) if ends else None))


def product_of(subscription: Mapping[str, Any]) -> str | None:
    """The first item's product (`price.product`, an id or expanded), else its price id."""
    for item in _items(subscription):
        price = item.get("price") or item.get("plan")
        if isinstance(price, Mapping):
            return _id(price.get("product")) or _id(price)
    return None


def billing_period_of(price: object) -> str | None:
    """A Price's (or a legacy Plan's) billing period as an ISO 8601 duration: `recurring`
    {`interval`, `interval_count`} (a Plan has both at its top level); None for a one-time
    price or an object that does not carry it (a price named by its id only)."""
    if not isinstance(price, Mapping):
        return None
    recurring: Mapping[str, Any] = price["recurring"] if isinstance(price.get("recurring"), Mapping) else price
    unit = INTERVALS.get(str(recurring.get("interval")))
    count = recurring.get("interval_count", 1)
    if unit is None or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return None
    return f"P{count}{unit}"


def _item_price(item: Mapping[str, Any]) -> Mapping[str, Any] | None:
    price = item.get("price") or item.get("plan")
    return price if isinstance(price, Mapping) else None


def subscription_price(subscription: Mapping[str, Any]) -> tuple[float, str] | None:
    """The subscription's list price per period: its items' `unit_amount` times `quantity`, in major
    units, when every item has a per-unit price in one currency (a tiered or metered price has
    no `unit_amount`: None, the price is not known from the subscription)."""
    total, currencies = 0, set()
    items = _items(subscription)
    for item in items:
        price = _item_price(item)
        amount = price.get("unit_amount") if price is not None else None
        currency = price.get("currency") if price is not None else None
        quantity = item.get("quantity", 1)
        if isinstance(amount, bool) or not isinstance(amount, int) or not isinstance(currency, str):
            return None
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 0:
            return None
        total += amount * quantity
        currencies.add(currency.lower())
    if not items or len(currencies) != 1:
        return None
    currency = currencies.pop()
    return major_units(total, currency), currency.upper()


def subscription_billing_period(subscription: Mapping[str, Any]) -> str | None:
    """The first item's billing period (a subscription's items share one, Stripe requires it)."""
    for item in _items(subscription):
        return billing_period_of(_item_price(item))
    return None


def subscription_fact(subscription: Mapping[str, Any], *, stated_at: datetime) -> StoreFact | None:
    """The subscription's state (see the module docstring); None without an id or a period."""
    sub_id = _id(subscription)
    if sub_id is None:
        return None
    status = subscription.get("status")
    start, end = period(subscription)
    ended = moment(subscription.get("ended_at"))
    in_trial = status == "trialing"
    if in_trial:
        end = moment(subscription.get("trial_end")) or end
    grace: datetime | None = None
    if status in ACCESS_STATUSES and end is not None:
        expires = end
    elif status in GRACE_STATUSES and end is not None:
        expires, grace = (start or stated_at), end
    else:
        expires = min(ended or stated_at, stated_at)
    cancelling = bool(subscription.get("cancel_at_period_end")) or subscription.get("cancel_at") is not None
    price = subscription_price(subscription) if status == "active" else None
    return StoreFact(
        source=PAYMENT_PROCESSOR,
        store_key=sub_id,
        product_id=product_of(subscription),
        kind="subscription",
        channel="web",
        environment="production" if subscription.get("livemode") else "sandbox",
        stated_at=stated_at,
        expires_at=expires,
        grace_ends_at=grace,
        in_trial=in_trial,
        auto_renew=status in ACCESS_STATUSES | GRACE_STATUSES and not cancelling,
        transaction_id=_id(subscription.get("latest_invoice")),
        user_hint=subscription_user(subscription),
        customer_id=customer_id(subscription),
        price_amount=price[0] if price else None,
        price_currency=price[1] if price else None,
        priced_at=(start or stated_at) if price else None,
        billing_period=subscription_billing_period(subscription),
    )


def _event(
    *,
    workspace_id: str,
    raw: str,
    event_type: str,
    occurred_at: datetime,
    received_at: datetime,
    user_id: str | None,
    properties: dict[str, Any],
) -> CanonicalEvent | None:
    if not lake_can_hold(occurred_at, received_at):
        return None
    return CanonicalEvent(
        event_id=event_id(raw, event_type),
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=occurred_at,
        source=PAYMENT_PROCESSOR,
        received_at=received_at,
        user_id=user_id,
        properties={k: v for k, v in properties.items() if v is not None},
    )


def subscription_events(
    subscription: Mapping[str, Any],
    *,
    stripe_type: str,
    previous: Mapping[str, Any] | None,
    workspace_id: str,
    user_id: str | None,
    received_at: datetime,
) -> list[CanonicalEvent]:
    """The lifecycle events a subscription event states: a trial begun, converted, or a
    cancellation (auto-renew off or the subscription ended)."""
    sub_id = _id(subscription)
    if sub_id is None or not subscription.get("livemode"):
        return []  # test-mode subscriptions are tests, not revenue or lifecycle
    status = subscription.get("status")
    props = {"product_id": product_of(subscription), "subscription_id": sub_id, "purchase_key": sub_id}
    out: list[CanonicalEvent | None] = []
    common: dict[str, Any] = {"workspace_id": workspace_id, "received_at": received_at, "user_id": user_id}
    billing = subscription_billing_period(subscription)
    if stripe_type == "customer.subscription.created" and status == "trialing":
        started = moment(subscription.get("trial_start")) or moment(subscription.get("created"))
        ends = moment(subscription.get("trial_end")) or period(subscription)[1]
        if started is not None:
            trial = props | {"period_ends_at": iso_z(ends), "billing_period": billing}
            out.append(_event(raw=sub_id, event_type=t.TRIAL_START, occurred_at=started, properties=trial, **common))
    was = previous.get("status") if previous else None
    if stripe_type == "customer.subscription.updated" and was == "trialing" and status == "active":
        converted = moment(subscription.get("trial_end")) or period(subscription)[0]
        if converted is not None:
            paid = props | {"period_ends_at": iso_z(period(subscription)[1]), "billing_period": billing}
            out.append(
                _event(raw=sub_id, event_type=t.TRIAL_CONVERTED, occurred_at=converted, properties=paid, **common)
            )
    cancelling = bool(subscription.get("cancel_at_period_end")) or status == "canceled"
    at = moment(subscription.get("canceled_at"))
    if cancelling and at is not None:
        raw = f"{sub_id}:{int(at.timestamp())}"
        out.append(_event(raw=raw, event_type=t.CANCELLATION, occurred_at=at, properties=props, **common))
    return [e for e in out if e is not None]


def invoice_subscription(invoice: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The subscription an invoice bills and the user its metadata names: `subscription` and
    `subscription_details` (older API versions) or `parent.subscription_details` (newer)."""
    details = invoice.get("subscription_details")
    parent = invoice.get("parent")
    if isinstance(parent, Mapping) and isinstance(parent.get("subscription_details"), Mapping):
        details = parent["subscription_details"]
    sub = _id(invoice.get("subscription"))
    if sub is None and isinstance(details, Mapping):
        sub = _id(details.get("subscription"))
    return sub, _metadata_user(details) or _metadata_user(invoice)


def _lines(invoice: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    lines = invoice.get("lines")
    data = lines.get("data") if isinstance(lines, Mapping) else None
    return [line for line in data if isinstance(line, Mapping)] if isinstance(data, list) else []


def invoice_period(invoice: Mapping[str, Any]) -> tuple[datetime | None, str | None]:
    """The period a subscription's invoice pays: its lines' latest `period.end`, and the billing
    period of the first line whose price (or legacy plan) carries `recurring` (API versions
    since 2025-03-31 name a line's price by id only: None)."""
    ends = [moment(line["period"].get("end")) for line in _lines(invoice) if isinstance(line.get("period"), Mapping)]
    known = [e for e in ends if e is not None]
    billing = next(
        (p for p in (billing_period_of(line.get("price") or line.get("plan")) for line in _lines(invoice)) if p), None
    )
    return (max(known) if known else None), billing


def invoice_events(
    invoice: Mapping[str, Any],
    *,
    workspace_id: str,
    user_id: str | None,
    received_at: datetime,
    purchase_key: str | None = None,
) -> list[CanonicalEvent]:
    """A paid invoice's revenue event (nothing for an unpaid, free or test-mode one). Its
    `purchase_key` is the subscription it bills, else `purchase_key` (a one-time purchase's key,
    which the caller resolved: `purchase_fact`)."""
    inv_id = _id(invoice)
    amount, currency = invoice.get("amount_paid"), invoice.get("currency")
    if inv_id is None or not invoice.get("livemode") or invoice.get("status") != "paid":
        return []
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0 or not isinstance(currency, str):
        return []
    transitions = invoice.get("status_transitions")
    paid_at = moment(transitions.get("paid_at")) if isinstance(transitions, Mapping) else None
    occurred = paid_at or moment(invoice.get("created"))
    if occurred is None:
        return []
    sub, _ = invoice_subscription(invoice)
    period_props: dict[str, Any] = {}
    if sub is None:
        kind = t.PURCHASE
    else:
        kind = t.SUBSCRIPTION_START if invoice.get("billing_reason") == "subscription_create" else t.RENEWAL
        ends, billing = invoice_period(invoice)
        period_props = {"period_ends_at": iso_z(ends), "billing_period": billing}
    found = _event(
        workspace_id=workspace_id,
        raw=inv_id,
        event_type=kind,
        occurred_at=occurred,
        received_at=received_at,
        user_id=user_id,
        properties={
            "revenue": major_units(amount, currency),
            "currency": currency.upper(),
            "subscription_id": sub,
            "invoice_id": inv_id,
            "billing_reason": invoice.get("billing_reason"),
            "purchase_key": sub or purchase_key,
            "transaction_id": inv_id,
            **period_props,
        },
    )
    return [found] if found is not None else []


def one_time_key(obj: Mapping[str, Any]) -> str | None:
    """What names a one-time payment: its PaymentIntent, else the charge itself."""
    return _id(obj.get("payment_intent")) or _id(obj)


def charge_invoice(charge: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The invoice a charge paid and the subscription that invoice bills, as far as the charge
    says: `invoice` (API versions before 2025-03-31; an id, or the Invoice when expanded)."""
    invoice = charge.get("invoice")
    sub = invoice_subscription(invoice)[0] if isinstance(invoice, Mapping) else None
    return _id(invoice), sub


def refunded_subscription(charge: Mapping[str, Any], reads: Reads) -> tuple[str | None, str | None, str | None]:
    """The subscription a refunded charge paid, the invoice, and the user that invoice's
    metadata names, for a charge the ledger holds no one-time purchase of: the charge's
    expanded invoice says; else Stripe is asked for the invoice the charge names (API versions
    before 2025-03-31) or that its PaymentIntent paid (since: the charge names no invoice). Only
    for a charge whose refund lands (live, with an amount). Nones: no invoice, or Stripe cannot
    be asked with this integration's key."""
    amount = charge.get("amount_refunded")
    if not charge.get("livemode") or isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        return None, None, None
    invoice_id, _ = charge_invoice(charge)
    invoice = charge.get("invoice") if isinstance(charge.get("invoice"), Mapping) else None
    if invoice is None:
        intent = _id(charge.get("payment_intent"))
        invoice_id = invoice_id or (reads.payment_invoice(intent) if intent is not None else None)
        invoice = reads.invoice(invoice_id) if invoice_id is not None else None
    if invoice is None:
        return None, invoice_id, None
    sub, user = invoice_subscription(invoice)
    return sub, invoice_id, user


def refund_events(
    charge: Mapping[str, Any],
    *,
    workspace_id: str,
    user_id: str | None,
    received_at: datetime,
    stated_at: datetime,
    purchase_key: str | None = None,
    transaction_id: str | None = None,
) -> list[CanonicalEvent]:
    """A refunded charge's `refund`, the refunded amount negative, at its latest refund's time
    (the event's own time when the charge's refunds are not included, as in API versions since
    2022-11-15). It names the refunded invoice (`transaction_id`: the caller's, else the charge's
    `invoice`) and the purchase (`purchase_key`: the caller's, else the subscription of an
    expanded invoice) when known."""
    charge_id = _id(charge)
    amount, currency = charge.get("amount_refunded"), charge.get("currency")
    if charge_id is None or not charge.get("livemode"):
        return []
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0 or not isinstance(currency, str):
        return []
    found = _event(
        workspace_id=workspace_id,
        raw=charge_id,
        event_type=t.REFUND,
        occurred_at=refund_time(charge, stated_at),
        received_at=received_at,
        user_id=user_id,
        properties={
            "revenue": -major_units(amount, currency),
            "currency": currency.upper(),
            "charge_id": charge_id,
            "payment_intent": _id(charge.get("payment_intent")),
            "fully_refunded": bool(charge.get("refunded")),
            "purchase_key": purchase_key or charge_invoice(charge)[1],
            "transaction_id": transaction_id or charge_invoice(charge)[0],
        },
    )
    return [found] if found is not None else []


def refund_time(charge: Mapping[str, Any], fallback: datetime) -> datetime:
    refunds = charge.get("refunds")
    data = refunds.get("data") if isinstance(refunds, Mapping) else None
    times = [moment(r.get("created")) for r in data if isinstance(r, Mapping)] if isinstance(data, list) else []
    known = [x for x in times if x is not None]
    return max(known) if known else fallback


def revoked(fact_state: Mapping[str, Any], *, store_key: str, revoked_at: datetime, stated_at: datetime) -> StoreFact:
    """A one-time purchase FloKit recorded (`fact_state`: its grant's columns), fully refunded."""
    return StoreFact(
        source=PAYMENT_PROCESSOR,
        store_key=store_key,
        product_id=fact_state.get("product_id"),
        kind=fact_state.get("kind") or "lifetime",
        channel="web",
        environment=fact_state.get("environment") or "production",
        stated_at=stated_at,
        expires_at=fact_state.get("expires_at"),
        revoked_at=revoked_at,
        revocation_reason="refund",
        auto_renew=False,
    )


def paid_invoice_key(invoice: Mapping[str, Any]) -> str | None:
    """What names the payment of an invoice in hand, as a refunded charge names it
    (`one_time_key`): API versions before 2025-03-31 give the invoice's `payment_intent` (or its
    `charge`, for a charge without one); later ones removed both fields, and give the payments
    only in the includable `payments`, present when the invoice was retrieved with
    `expand=["payments"]`. None: the invoice in hand does not say (ask `invoice_payments`)."""
    in_hand = _id(invoice.get("payment_intent")) or _id(invoice.get("charge"))
    payments = invoice.get("payments")
    if in_hand is None and isinstance(payments, Mapping) and isinstance(payments.get("data"), list):
        in_hand = payment_key(payments["data"])
    return in_hand


def payment_key(payments: Sequence[object]) -> str | None:
    """The payment that names a one-time purchase among an invoice's InvoicePayments (API
    2025-03-31 on): a paid one, the default one (the PaymentIntent Stripe made when finalizing
    the invoice, the one older versions named in `invoice.payment_intent`) first, else the
    earliest, so every reader picks the same whatever order Stripe lists them in. Its
    `payment.payment_intent`, else `payment.charge` (Stripe surfaces a charge only when it has
    no PaymentIntent). None: no paid payment through a PaymentIntent or a charge (out of band,
    or nothing paid)."""
    found: list[tuple[bool, int, str, str]] = []
    for entry in payments:
        if not isinstance(entry, Mapping) or entry.get("status") != "paid":
            continue
        payment = entry.get("payment")
        key = (
            (_id(payment.get("payment_intent")) or _id(payment.get("charge"))) if isinstance(payment, Mapping) else None
        )
        created = entry.get("created")
        if key is not None:
            when = created if isinstance(created, int) and not isinstance(created, bool) else 0
            found.append((entry.get("is_default") is not True, when, str(entry.get("id") or ""), key))
    return min(found)[3] if found else None


def needs_payments(invoice: Mapping[str, Any]) -> bool:
    """A paid one-time invoice whose payment the invoice in hand does not name: the reader
    asks Stripe for its payments (`Reads.invoice_payments`) before mapping it."""
    sub, _ = invoice_subscription(invoice)
    return (
        sub is None and invoice.get("status") == "paid" and _id(invoice) is not None and not paid_invoice_key(invoice)
    )


def purchase_fact(
    invoice: Mapping[str, Any], *, stated_at: datetime, payments: Sequence[object] = ()
) -> StoreFact | None:
    """A paid invoice without a subscription: a one-time purchase (lifetime), named by its
    PaymentIntent so that the charge's refund finds it (`one_time_key`): the invoice's own
    (`paid_invoice_key`), else the one its `payments` (`GET /v1/invoice_payments?invoice=`)
    name. The invoice id names it only when Stripe reports no payment that a charge could
    refund (paid out of band, or nothing to pay): no refund event can name such a purchase."""
    sub, user = invoice_subscription(invoice)
    if sub is not None or invoice.get("status") != "paid":
        return None
    key = paid_invoice_key(invoice) or payment_key(payments) or _id(invoice)
    if key is None:
        return None
    product = None
    lines = invoice.get("lines")
    data = lines.get("data") if isinstance(lines, Mapping) else None
    for line in data if isinstance(data, list) else []:
        if isinstance(line, Mapping):
            price = line.get("price")
            pricing = line.get("pricing")
            if isinstance(price, Mapping):
                product = _id(price.get("product")) or _id(price)
            elif isinstance(pricing, Mapping) and isinstance(pricing.get("price_details"), Mapping):
                product = _id(pricing["price_details"].get("product"))
            if product:
                break
    return StoreFact(
        source=PAYMENT_PROCESSOR,
        store_key=key,
        product_id=product,
        kind="lifetime",
        channel="web",
        environment="production" if invoice.get("livemode") else "sandbox",
        stated_at=stated_at,
        transaction_id=_id(invoice),
        user_hint=user or _metadata_user(invoice.get("customer")),
        customer_id=customer_id(invoice),
    )


class Reads(Protocol):
    """What mapping an event needs to know besides the event: the ledger's view of a purchase
    and, for a subscription nobody is linked to yet, the Customer's metadata, and for a one-time
    invoice that names no PaymentIntent, its payments. The webhook handler reads them through
    its context, the sync through its database and Stripe client."""

    def linked_user(self, subscription_id: str) -> str | None:
        """The user the ledger links the purchase to (a subscription, or a one-time purchase by its
        key): its first statement named them."""

    def customer_user(self, customer_id: str) -> str | None:
        """The user the Customer's metadata names (None: it names none, or Stripe has no such
        customer)."""

    def grant(self, store_key: str) -> Mapping[str, Any] | None:
        """The ledger's grant of a purchase (its columns, with `user_id`), or None."""

    def invoice_payments(self, invoice_id: str) -> Sequence[Mapping[str, Any]]:
        """The invoice's InvoicePayments as Stripe lists them (`GET /v1/invoice_payments?invoice=`;
        empty: Stripe reports none). Raises when Stripe cannot be asked: the purchase is not
        applied under another key meanwhile."""

    def invoice(self, invoice_id: str) -> Mapping[str, Any] | None:
        """The Invoice (`GET /v1/invoices/{id}`); None when Stripe does not know it or the
        integration has no key to ask with. Raises when Stripe cannot be asked."""

    def payment_invoice(self, payment_intent: str) -> str | None:
        """The id of the invoice the PaymentIntent paid (its InvoicePayment); None when it paid
        none or there is no key to ask with. Raises when Stripe cannot be asked."""


def event_effects(
    stripe_type: str,
    obj: Mapping[str, Any],
    *,
    previous: Mapping[str, Any] | None,
    stated_at: datetime,
    received_at: datetime,
    workspace_id: str,
    app_id: str,
    reads: Reads,
) -> Effects:
    """What one Stripe event (or the sync's reading of the same object) changes: shared by the
    webhook handler and the sync so that both state the same facts with the same event ids."""
    if stripe_type in SUBSCRIPTION_EVENTS:
        fact = subscription_fact(obj, stated_at=stated_at)
        if fact is None:
            return Effects(note=f"{stripe_type}: no subscription id")
        customer = customer_id(obj)
        if fact.user_hint is None and customer and reads.linked_user(fact.store_key) is None:
            fact = replace(fact, user_hint=reads.customer_user(customer))

        def lifecycle(user: str | None) -> Sequence[CanonicalEvent]:
            return subscription_events(
                obj,
                stripe_type=stripe_type,
                previous=previous,
                workspace_id=workspace_id,
                user_id=user,
                received_at=received_at,
            )

        return Effects(effects=[Effect(app_id, fact, lifecycle)], note=f"{stripe_type} {fact.store_key}")

    if stripe_type == "invoice.paid":
        sub, named = invoice_subscription(obj)
        if sub is None:
            inv_id = _id(obj)
            payments = reads.invoice_payments(inv_id) if inv_id is not None and needs_payments(obj) else ()
            purchase = purchase_fact(obj, stated_at=stated_at, payments=payments)
            customer = customer_id(obj)
            # Not linked yet: a later event of a linked purchase need not ask Stripe again.
            if (
                purchase is not None
                and purchase.user_hint is None
                and customer is not None
                and reads.linked_user(purchase.store_key) is None
            ):
                purchase = replace(purchase, user_hint=reads.customer_user(customer))
            if purchase is not None:
                bought = purchase.store_key

                def revenue(user: str | None) -> Sequence[CanonicalEvent]:
                    return invoice_events(
                        obj, workspace_id=workspace_id, user_id=user, received_at=received_at, purchase_key=bought
                    )

                return Effects(
                    effects=[Effect(app_id, purchase, revenue)], note=f"one-time purchase {purchase.store_key}"
                )
        user = (reads.linked_user(sub) if sub is not None else None) or named
        found = invoice_events(obj, workspace_id=workspace_id, user_id=user, received_at=received_at)
        return Effects(events=found, note=f"invoice {obj.get('id')} of {sub}")

    if stripe_type == "charge.refunded":
        key = one_time_key(obj)
        grant = reads.grant(key) if key else None
        at = refund_time(obj, stated_at)
        if grant is not None and key is not None and obj.get("refunded") is True:
            fact = revoked(grant, store_key=key, revoked_at=at, stated_at=max(stated_at, at))

            def refund(user: str | None) -> Sequence[CanonicalEvent]:
                return refund_events(
                    obj, workspace_id=workspace_id, user_id=user, received_at=received_at, stated_at=stated_at,
                    purchase_key=key,
                )  # fmt: skip

            return Effects(effects=[Effect(app_id, fact, refund)], note=f"refund revokes {key}")
        granted = grant.get("user_id") if grant is not None else None
        refunded, invoice_id, named = (key, None, None) if grant is not None else refunded_subscription(obj, reads)
        linked = reads.linked_user(refunded) if grant is None and refunded is not None else None
        user = (granted if isinstance(granted, str) else None) or linked or named or subscription_user(obj)
        found = refund_events(
            obj, workspace_id=workspace_id, user_id=user, received_at=received_at, stated_at=stated_at,
            purchase_key=refunded, transaction_id=invoice_id,
        )  # fmt: skip
        return Effects(events=found, note=f"refund of charge {obj.get('id')}")

    if stripe_type == "invoice.payment_failed":
        return Effects(note="payment failed: the subscription's own update (past_due) carries the state")
    return Effects(note=f"{stripe_type} is not read by FloKit; stored only")
