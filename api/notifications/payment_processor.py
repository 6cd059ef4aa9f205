"""`payment_processor` (Stripe): webhook events (`/webhooks/payment_processor?integration=int_…`).

Authenticated with the `Stripe-Signature` header, verified by the `stripe` library
(`Webhook.construct_event`: HMAC-SHA256 of `t.body` under the endpoint's signing secret, and a
timestamp at most 5 minutes old) against the `webhook_secret` of the integration the URL
names. Handled: `customer.subscription.*` (the subscription's state), `invoice.paid` (revenue;
an invoice without a subscription is a one-time purchase), `charge.refunded` (a negative
refund; a fully refunded one-time purchase is revoked). A one-time purchase is keyed by the
PaymentIntent its refund will name: when the event's invoice names none (API versions since
2025-03-31), its payments are read from Stripe with the integration's `secret_key`, as a
Customer is for a subscription whose metadata names no user; Stripe unreachable or refusing is
a 502 (too slow a 504), and Stripe redelivers the event. Any other type is stored and
acknowledged with nothing applied (the endpoint may be subscribed to more than FloKit reads;
Stripe would otherwise retry it for three days). `invoice.payment_failed` changes nothing by
itself: Stripe follows it with `customer.subscription.updated` (`past_due`), which carries the
state. The mapping and its conventions: `transforms.purchases.payment_processor`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import stripe

from api.notifications.framework import (
    Context,
    Handler,
    Incoming,
    Malformed,
    StoreUnavailable,
    Unverified,
    Verified,
    store_errors,
)
from api.notifications.tenant import integration_tenant, tenant_of
from clients import payment_processor as stripe_api
from transforms.entitlements.effects import Effects
from transforms.entitlements.facts import PAYMENT_PROCESSOR
from transforms.purchases import payment_processor as mapping
from warehouse.entitlements import ledger
from warehouse.entitlements.notifications import StoredNotification

PROVIDER = "payment_processor"


def _json(body: bytes) -> dict[str, Any]:
    try:
        found = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise Malformed("The body is not JSON") from None
    if not isinstance(found, dict) or not isinstance(found.get("id"), str) or not isinstance(found.get("type"), str):
        raise Malformed("The body is not a Stripe event (no id or type)")
    if not isinstance(found.get("data"), dict) or not isinstance(found["data"].get("object"), dict):
        raise Malformed("The Stripe event has no data.object")
    return found


class StripeHandler:
    def verify(self, incoming: Incoming, ctx: Context) -> Verified:
        tenant = tenant_of(incoming, ctx, PROVIDER)
        secret = tenant.config.get("webhook_secret")
        if not isinstance(secret, str) or not secret:
            raise Unverified(f"Integration {tenant.integration_id} has no webhook_secret")
        try:
            stripe.Webhook.construct_event(incoming.body, incoming.header("Stripe-Signature"), secret)
        except stripe.SignatureVerificationError as e:
            raise Unverified(f"Stripe-Signature not verified: {e.user_message or e}") from None
        except UnicodeDecodeError:  # read before the signature: a 400 here would say the integration exists
            raise Unverified("The body is not UTF-8, so no Stripe-Signature can cover it") from None
        except ValueError:
            raise Malformed("The body is not a Stripe event") from None
        if tenant.app_id is None:
            raise Unverified(f"Integration {tenant.integration_id} has no app_id")
        event = _json(incoming.body)
        return Verified(PROVIDER, event["id"], tenant.workspace_id, tenant.app_id, tenant.integration_id, event)

    def decode(self, stored: StoredNotification, ctx: Context) -> Verified:
        """Replay: the signature was checked when it arrived; its 5-minute tolerance is long past."""
        tenant = integration_tenant(ctx, integration_id=stored.integration_id, integration_type=PROVIDER)
        event = _json(stored.body)
        app_id = stored.app_id or tenant.app_id
        return Verified(PROVIDER, stored.dedup_key, stored.workspace_id, app_id, stored.integration_id, event)

    def effects(self, verified: Verified, ctx: Context) -> Effects:
        event: Mapping[str, Any] = verified.payload
        workspace_id, app_id = verified.workspace_id, verified.app_id
        assert workspace_id is not None and app_id is not None
        previous = event["data"].get("previous_attributes")
        return mapping.event_effects(
            event["type"],
            event["data"]["object"],
            previous=previous if isinstance(previous, Mapping) else None,
            stated_at=mapping.moment(event.get("created")) or datetime.now(UTC),
            received_at=datetime.now(UTC),
            workspace_id=workspace_id,
            app_id=app_id,
            reads=_Reads(ctx, verified, app_id),
        )


class _Reads:
    """The ledger and Stripe, as the mapping reads them (`mapping.Reads`)."""

    def __init__(self, ctx: Context, verified: Verified, app_id: str) -> None:
        self.ctx, self.verified, self.app_id = ctx, verified, app_id

    def linked_user(self, subscription_id: str) -> str | None:
        grant = self.grant(subscription_id)
        user = grant.get("user_id") if grant is not None else None
        return user if isinstance(user, str) else None

    def customer_user(self, customer_id: str) -> str | None:
        return _customer_user(self.ctx, self.verified, customer_id)

    def grant(self, store_key: str) -> Mapping[str, Any] | None:
        with self.ctx.database.read() as conn:
            found = ledger.grant_for(conn, app_id=self.app_id, source=PAYMENT_PROCESSOR, store_key=store_key)
        return dict(found._mapping) if found is not None else None

    def invoice_payments(self, invoice_id: str) -> list[dict[str, Any]]:
        return _invoice_payments(self.ctx, self.verified, invoice_id)

    def invoice(self, invoice_id: str) -> Mapping[str, Any] | None:
        client = _client(self.ctx, self.verified)
        if client is None:
            return None  # without a key the refund lands without its purchase, as before
        with store_errors():
            return stripe_api.invoice(client, invoice_id)

    def payment_invoice(self, payment_intent: str) -> str | None:
        client = _client(self.ctx, self.verified)
        if client is None:
            return None
        with store_errors():
            return stripe_api.payment_invoice(client, payment_intent)


def _client(ctx: Context, verified: Verified) -> stripe.StripeClient | None:
    """A Stripe reader with the integration's secret key (None without one)."""
    tenant = integration_tenant(ctx, integration_id=verified.integration_id, integration_type=PROVIDER)
    key, base = tenant.config.get("secret_key"), tenant.config.get("base_url")
    if not isinstance(key, str) or not key:
        return None
    return stripe_api.reader(key, base if isinstance(base, str) and base else None)


def _customer_user(ctx: Context, verified: Verified, customer: str) -> str | None:
    """The user a Customer's metadata names, read from Stripe with the integration's secret key
    (only for a subscription not linked to a user yet, whose own metadata names none). A deleted
    or unknown customer: the purchase stays unlinked until a statement names its user."""
    client = _client(ctx, verified)
    if client is None:
        return None
    with store_errors():
        found = stripe_api.customer(client, customer)
    return mapping.subscription_user({"customer": found}) if found is not None else None


def _invoice_payments(ctx: Context, verified: Verified, invoice: str) -> list[dict[str, Any]]:
    """The invoice's payments, for a one-time purchase whose `invoice.paid` names no
    PaymentIntent (API versions since 2025-03-31). Any failure, a missing key included, is a 5xx:
    applied under the invoice id meanwhile, the purchase would be a grant that its refund cannot find."""
    client = _client(ctx, verified)
    if client is None:
        raise StoreUnavailable(f"Integration {verified.integration_id} has no secret_key to read invoice {invoice}")
    with store_errors():
        return stripe_api.invoice_payments(client, invoice)


def handler_for(path: str) -> Handler:
    return StripeHandler()
