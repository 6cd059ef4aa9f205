"""`payment_processor` (Stripe): reconciliation of what the webhook endpoint missed.

Stripe's lists answer newest first, 1-100 objects a page, paged by `starting_after` (an object
id), and filter by `created`; `GET /v1/events` keeps events 30 days only, and a `created` filter
on objects misses their later updates (design/integrations.md §1.6). So a sync reads:

- the events the webhook handler applies (`types`, `transforms.purchases.payment_processor.APPLIED_EVENTS`)
  created since the integration's cursor (`state["stripe"]["cursor"]`, Unix seconds, re-read with
  an overlap of a few minutes for events Stripe lists late), at most 30 days back, applied oldest
  first through the handler's own mapping (`event_effects`), so a webhook and a sync of one event
  state the same facts with the same event ids and land once;
- when there is no cursor yet (the first sync) or it is older than the events Stripe keeps:
  every subscription (`status=all`: their state now, since a `created` range would miss an old
  subscription changed in the gap), the invoices created since the cursor that are paid, and the
  refunds created since it (with their charge), mapped as `customer.subscription.*`,
  `invoice.paid` and `charge.refunded` events of the same objects would be.

The client speaks the `stripe` library's API version (2025-03-31 or later), whose invoices
name no PaymentIntent: a paid one-time invoice's payments are listed
(`GET /v1/invoice_payments?invoice=`) so that its purchase gets the key the webhook handler
gives it and its refund names (`transforms.purchases.payment_processor.purchase_fact`).

The client and its retries under Stripe's rules (`StripeSync`, a per-sync budget of waiting):
`clients.payment_processor`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import stripe

from clients.payment_processor import StripeSync
from orchestration.syncs.connectors import Connector, Log
from transforms.client_errors import error_for
from transforms.entitlements.effects import Effects
from transforms.entitlements.facts import PAYMENT_PROCESSOR
from transforms.integrations.kinds import ValidConfig
from transforms.purchases import payment_processor as mapping
from warehouse.entitlements import ledger
from warehouse.entitlements.apply import apply_effects
from warehouse.integrations.target import SyncTarget

STATE_KEY = "stripe"
# Stripe lists events of the last 30 days only.
EVENTS_KEPT = timedelta(days=30)
# A cursor older than this is swept with the objects' lists (a day of margin on the 30).
SWEEP_AFTER = timedelta(days=29)
# Events are asked for from this long before the cursor: an event Stripe lists a little late,
# or stamped by a clock slightly behind ours, is still read (applying it twice changes nothing).
OVERLAP = timedelta(minutes=5)


def client(config: ValidConfig) -> StripeSync:
    return StripeSync(secret_key=config.get("secret_key"), base_url=config.get("base_url") or "https://api.stripe.com")


def check(sc: StripeSync) -> str:
    what = "listing the account's events"
    page = sc.call(what, lambda: sc.stripe.v1.events.list(params={"limit": 1}))
    data = getattr(page, "data", None)
    if not isinstance(data, list):
        raise error_for("bad_response", f"{what}: not a Stripe list")
    if not data:
        return "Stripe: the key can list events; none in the last 30 days"
    latest = data[0].to_dict() if isinstance(data[0], stripe.StripeObject) else data[0]
    mode = "live" if latest.get("livemode") else "test"
    when = mapping.moment(latest.get("created"))
    at = when.isoformat() if when is not None else "an unknown time"
    return f"Stripe ({mode} mode): the key can list events; the latest is {latest.get('type')} at {at}"


class _SyncReads:
    """`mapping.Reads` for the sync: the ledger through the target's database, customers
    through the integration's key (each read once per sync)."""

    def __init__(self, sc: StripeSync, target: SyncTarget, app_id: str) -> None:
        self.sc, self.target, self.app_id = sc, target, app_id
        self.customers: dict[str, str | None] = {}

    def linked_user(self, subscription_id: str) -> str | None:
        grant = self.grant(subscription_id)
        user = grant.get("user_id") if grant is not None else None
        return user if isinstance(user, str) else None

    def customer_user(self, customer_id: str) -> str | None:
        if customer_id not in self.customers:
            found = self.sc.call(
                f"reading customer {customer_id}",
                lambda: self.sc.stripe.v1.customers.retrieve(customer_id),
                missing_ok=True,  # deleted: the purchase stays unlinked until a statement names its user
            )
            self.customers[customer_id] = (
                mapping.subscription_user({"customer": found.to_dict()}) if found is not None else None
            )
        return self.customers[customer_id]

    def grant(self, store_key: str) -> Mapping[str, Any] | None:
        with self.target.database.read() as conn:
            found = ledger.grant_for(conn, app_id=self.app_id, source=PAYMENT_PROCESSOR, store_key=store_key)
        return dict(found._mapping) if found is not None else None

    def invoice_payments(self, invoice_id: str) -> list[dict[str, Any]]:
        """Every page of the invoice's payments; a failure fails the sync (its cursor stays), so
        the purchase is never granted under the invoice id while Stripe is not answering."""
        v1 = self.sc.stripe.v1
        pages = self.sc.pages(
            f"listing the payments of invoice {invoice_id}",
            lambda p: v1.invoice_payments.list(p),
            {"invoice": invoice_id},
        )
        return [payment for page in pages for payment in page]

    def invoice(self, invoice_id: str) -> Mapping[str, Any] | None:
        found = self.sc.call(
            f"reading invoice {invoice_id}", lambda: self.sc.stripe.v1.invoices.retrieve(invoice_id), missing_ok=True
        )
        return found.to_dict() if found is not None else None

    def payment_invoice(self, payment_intent: str) -> str | None:
        v1 = self.sc.stripe.v1
        page = self.sc.call(
            f"finding the invoice paid by {payment_intent}",
            lambda: v1.invoice_payments.list(
                {"payment": {"type": "payment_intent", "payment_intent": payment_intent}, "limit": 1}
            ),
            missing_ok=True,  # an API (or a stand-in) without invoice payments: no invoice known
        )
        data = getattr(page, "data", None) or []
        first = data[0].to_dict() if data and isinstance(data[0], stripe.StripeObject) else (data[0] if data else {})
        invoice_id = first.get("invoice") if isinstance(first, Mapping) else None
        return invoice_id if isinstance(invoice_id, str) and invoice_id else None


@dataclass
class _Run:
    sc: StripeSync
    target: SyncTarget
    app_id: str
    reads: _SyncReads
    applied: int = 0
    changed: int = 0

    def apply(self, stripe_type: str, obj: Mapping[str, Any], *, stated_at: datetime, previous: Any = None) -> None:
        effects: Effects = mapping.event_effects(
            stripe_type,
            obj,
            previous=previous if isinstance(previous, Mapping) else None,
            stated_at=stated_at,
            received_at=self.target.now,
            workspace_id=self.target.workspace_id,
            app_id=self.app_id,
            reads=self.reads,
        )
        if not effects.effects and not effects.events:
            return
        outcome = apply_effects(
            self.target.database, workspace_id=self.target.workspace_id, effects=effects, notification_id=None
        )
        self.applied += 1
        self.changed += outcome.grants
        self.target.records += outcome.events_written

    def sweep(self, since: int | None) -> None:
        """The objects' lists (first sync, or a cursor older than the events Stripe keeps)."""
        v1 = self.sc.stripe.v1
        created = {"created": {"gt": since}} if since is not None else {}
        subscriptions = self.sc.pages(
            "listing subscriptions", lambda p: v1.subscriptions.list(p), {"status": "all", "expand": ["data.customer"]}
        )
        # Stated as of the second the sweep starts (after the events were read, so it is the
        # newest statement of this sync): an event of that same second (Stripe's times are
        # whole seconds) is applied after it by a later sync, not lost behind a fraction.
        read_at = datetime.now(UTC).replace(microsecond=0)
        for page in subscriptions:
            for sub in page:
                # Its state as read now; `created` semantics: a trialing one states its trial's start.
                self.apply("customer.subscription.created", sub, stated_at=read_at)
        invoices = self.sc.pages(
            "listing invoices", lambda p: v1.invoices.list(p), {**created, "expand": ["data.customer"]}
        )
        for page in invoices:
            for invoice in page:
                if invoice.get("status") == "paid":
                    self.apply("invoice.paid", invoice, stated_at=_paid_at(invoice, self.target.now))
        charges: dict[str, tuple[dict[str, Any], int]] = {}
        for page in self.sc.pages(
            "listing refunds", lambda p: v1.refunds.list(p), {**created, "expand": ["data.charge.customer"]}
        ):
            for refund in page:
                charge, at = refund.get("charge"), refund.get("created")
                if isinstance(charge, dict) and isinstance(charge.get("id"), str) and isinstance(at, int):
                    seen = charges.get(charge["id"])
                    charges[charge["id"]] = (charge, max(at, seen[1]) if seen else at)
        for charge, at in sorted(charges.values(), key=lambda pair: pair[1]):
            self.apply("charge.refunded", charge, stated_at=mapping.moment(at) or self.target.now)

    def events(self, since: int) -> int:
        """The applied event types created since `since`, oldest first; how many were read."""
        v1 = self.sc.stripe.v1
        params = {"types": sorted(mapping.APPLIED_EVENTS), "created": {"gte": since}}
        found = [e for page in self.sc.pages("listing events", lambda p: v1.events.list(p), params) for e in page]
        # Oldest first. Stripe's times are whole seconds and its lists newest first: within one
        # second, the reverse of the listing order is the order they happened in.
        found.reverse()
        found.sort(key=lambda e: e.get("created") or 0)
        for event in found:
            data = event.get("data")
            obj = data.get("object") if isinstance(data, dict) else None
            kind = event.get("type")
            if not isinstance(obj, dict) or not isinstance(kind, str):
                raise error_for("bad_response", f"event {event['id']} has no type or data.object")
            stated_at = mapping.moment(event.get("created")) or self.target.now
            assert isinstance(data, dict)
            self.apply(kind, obj, stated_at=stated_at, previous=data.get("previous_attributes"))
        return len(found)


def _paid_at(invoice: Mapping[str, Any], fallback: datetime) -> datetime:
    """When an invoice was paid (what an `invoice.paid` event's time would say)."""
    transitions = invoice.get("status_transitions")
    paid = mapping.moment(transitions.get("paid_at")) if isinstance(transitions, Mapping) else None
    return paid or mapping.moment(invoice.get("created")) or fallback


def sync(sc: StripeSync, target: SyncTarget, config: ValidConfig, log: Log) -> None:
    app_id = config.get("app_id")
    if not isinstance(app_id, str) or not app_id:
        raise error_for("config", "the payment_processor integration names no app_id")
    sc.log = log
    started = int(time.time())
    state: dict[str, Any] = dict(target.state.get(STATE_KEY) or {})
    cursor = state.get("cursor")
    cursor = cursor if isinstance(cursor, int) else None
    now = target.now
    oldest_event = int((now - EVENTS_KEPT).timestamp())
    run = _Run(sc, target, app_id, _SyncReads(sc, target, app_id))
    calls_before, limited_before = sc.calls, sc.rate_limited
    swept = cursor is None or cursor < int((now - SWEEP_AFTER).timestamp())
    since = max(cursor - int(OVERLAP.total_seconds()), oldest_event) if cursor is not None else oldest_event
    read = run.events(since)
    if swept:
        gap = f" created after {mapping.moment(cursor)}" if cursor is not None else ""
        log(f"Stripe: sweeping every subscription, and the paid invoices and refunds{gap}")
        run.sweep(cursor)
    calls, limited = sc.calls - calls_before, sc.rate_limited - limited_before
    target.state[STATE_KEY] = {
        "cursor": max(started, cursor or 0),
        "events_read": read,
        "swept": swept,
        "requests": calls,
        "rate_limited": limited,
    }
    log(
        f"Stripe: {read} event(s) read{' after a sweep' if swept else ''}, {run.applied} applied, "
        f"{run.changed} purchase(s) changed, {target.records} new event(s), {calls} requests ({limited} answered 429)"
    )


CONNECTOR = Connector(type="payment_processor", client=client, check=check, sync=sync)
