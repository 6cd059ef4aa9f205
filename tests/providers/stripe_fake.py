"""A fake Stripe API on 127.0.0.1 for what localstripe cannot do, a signed webhook delivery, and
the Stripe objects the webhook and sync tests build, in the shapes Stripe's API reference gives them (stripe-python
16.1 types: `Event`, `Subscription`, `Invoice`, `InvoicePayment`, `Charge`).

The fake answers `GET /v1/{events,subscriptions,invoices,refunds,invoice_payments}`,
`GET /v1/customers/{id}` and `GET /v1/invoices/{id}` as Stripe does: newest first, `limit`,
`starting_after`, `created[gt|gte]`, `types[]`, and for invoice payments `invoice`, `status`
and `payment[payment_intent]`; Bearer
authentication (401 with Stripe's message otherwise); scripted failures answered before the
real answer. localstripe (1.15) predates API version 2025-03-31 ("basil"): it has no invoice
payments, the only place a basil invoice names the PaymentIntent that paid it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import stripe
from flask.testing import FlaskClient
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

KEY = "sk_live_fake0123456789"
WEBHOOK_SECRET = "whsec_test_0123456789abcdefghijklmnop"
LISTS = ("events", "subscriptions", "invoices", "refunds", "invoice_payments")


def error(status: int, message: str, kind: str = "invalid_request_error", **headers: str) -> Response:
    body = {"error": {"message": message, "type": kind}}
    return Response(json.dumps(body), status=status, headers=headers, content_type="application/json")


class StripeFake:
    """See the module docstring. `lists[name]` holds each list's objects, `customers` the
    retrievable customers; `seen` every request's (monotonic time, path?query)."""

    def __init__(self, server: HTTPServer, key: str = KEY) -> None:
        self.lists: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTS}
        self.customers: dict[str, dict[str, Any]] = {}
        self.key = key
        self.failures: list[Response] = []
        self.seen: list[tuple[float, str]] = []
        self.url = server.url_for("").rstrip("/")
        server.expect_request(re.compile("^/v1/")).respond_with_handler(self.handle)

    def handle(self, request: Request) -> Response:
        self.seen.append((time.monotonic(), request.full_path))
        if request.headers.get("Authorization") != f"Bearer {self.key}":
            return error(401, "Invalid API Key provided: sk_live_****wrong")
        if self.failures:
            return self.failures.pop(0)
        name = request.path.removeprefix("/v1/")
        if name.startswith("customers/"):
            customer = self.customers.get(name.removeprefix("customers/"))
            return (
                Response(json.dumps(customer), content_type="application/json")
                if customer
                else error(404, "No such customer")
            )
        if name.startswith("invoices/"):
            invoice = next((i for i in self.lists["invoices"] if i["id"] == name.removeprefix("invoices/")), None)
            return (
                Response(json.dumps(invoice), content_type="application/json")
                if invoice
                else error(404, "No such invoice")
            )
        if name not in self.lists:
            return error(404, f"Unrecognized request URL (GET: /v1/{name}).")
        items = sorted(self.lists[name], key=lambda o: (o["created"], o["id"]), reverse=True)
        args = request.args
        types = [v for k, v in args.items(multi=True) if k.startswith("types[")]
        if types:
            items = [o for o in items if o["type"] in types]
        if "created[gte]" in args:
            items = [o for o in items if o["created"] >= int(args["created[gte]"])]
        if "created[gt]" in args:
            items = [o for o in items if o["created"] > int(args["created[gt]"])]
        if name == "invoice_payments" and "invoice" in args:
            items = [o for o in items if o["invoice"] == args["invoice"]]
        if name == "invoice_payments" and "payment[payment_intent]" in args:
            items = [o for o in items if o["payment"].get("payment_intent") == args["payment[payment_intent]"]]
        if name == "invoice_payments" and "status" in args:
            items = [o for o in items if o["status"] == args["status"]]
        after = args.get("starting_after")
        if after:
            items = items[[o["id"] for o in items].index(after) + 1 :]
        limit = int(args.get("limit", 10))
        body = {"object": "list", "url": "/v1/" + name, "has_more": len(items) > limit, "data": items[:limit]}
        return Response(json.dumps(body), content_type="application/json")

    def paths(self, prefix: str) -> list[str]:
        return [p for _, p in self.seen if p.startswith(prefix)]


@pytest.fixture
def stripe_fake() -> Iterator[StripeFake]:
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    try:
        yield StripeFake(server)
    finally:
        server.clear()
        server.stop()


def post_event(
    client: FlaskClient,
    integration_id: str,
    sent: dict[str, Any],
    *,
    secret: str = WEBHOOK_SECRET,
    at: int | None = None,
) -> Any:
    """Deliver an event to the gateway's Stripe path as Stripe does, signed with the library's
    own test helper (`WebhookSignature.generate_signature_header`)."""
    body = json.dumps(sent)
    header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=at)
    return client.post(
        f"/webhooks/payment_processor?integration={integration_id}",
        data=body,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
    )


# --- Stripe's objects --------------------------------------------------------------------------


def event(kind: str, obj: dict[str, Any], *, event_id: str, created: int | None = None, **data: Any) -> dict[str, Any]:
    """An Event of API version 2025-03-31 (`data` may add `previous_attributes`)."""
    return {
        "id": event_id,
        "object": "event",
        "api_version": "2025-03-31.basil",
        "created": created or int(time.time()),
        "livemode": True,
        "type": kind,
        "data": {"object": obj, **data},
    }


def subscription(
    status: str = "active", *, user: str | None = "user-7", period_end: int | None = None, **extra: Any
) -> dict[str, Any]:
    """`sub_1` of `cus_1`, a day into a 30-day period; API 2025-03-31: the period lives on the items."""
    now = int(time.time())
    return {
        "id": "sub_1",
        "object": "subscription",
        "customer": "cus_1",
        "status": status,
        "livemode": True,
        "metadata": {"flokit_user_id": user} if user else {},
        "cancel_at_period_end": False,
        "canceled_at": None,
        "ended_at": None,
        "created": now - 86400,
        "items": {
            "object": "list",
            "data": [
                {
                    "id": "si_1",
                    "current_period_start": now - 86400,
                    "current_period_end": period_end or now + 29 * 86400,
                    "price": {"id": "price_1", "product": "prod_pro"},
                }
            ],
        },
        **extra,
    }


def subscription_invoice(
    invoice_id: str, *, at: int, billing_reason: str = "subscription_cycle", user: str = "user-7", sub: str = "sub_1"
) -> dict[str, Any]:
    """A paid invoice of a subscription, EUR 12.99; API 2025-03-31 names the subscription under
    `parent.subscription_details`."""
    return {
        "id": invoice_id,
        "object": "invoice",
        "customer": "cus_1",
        "livemode": True,
        "status": "paid",
        "amount_paid": 1299,
        "currency": "eur",
        "billing_reason": billing_reason,
        "created": at,
        "status_transitions": {"paid_at": at},
        "parent": {"subscription_details": {"subscription": sub, "metadata": {"flokit_user_id": user}}},
    }


def one_time_invoice(
    invoice_id: str, *, at: int, user: str = "user-9", payment_intent: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A paid invoice without a subscription (a lifetime purchase, USD 49.99). With
    `payment_intent`, as API versions before 2025-03-31 send it; without, as later ones do: no
    `payment_intent` nor `charge` field, the payments only in the includable `payments` (not in
    events or lists unless expanded) and at `GET /v1/invoice_payments?invoice=`."""
    found: dict[str, Any] = {
        "id": invoice_id,
        "object": "invoice",
        "livemode": True,
        "status": "paid",
        "amount_paid": 4999,
        "currency": "usd",
        "billing_reason": "manual",
        "customer": "cus_9",
        "metadata": {"flokit_user_id": user},
        "created": at,
        "status_transitions": {"paid_at": at},
        "parent": None,
        "lines": {"object": "list", "data": [{"price": {"id": "price_life", "product": "prod_lifetime"}}]},
    }
    if payment_intent is not None:
        found |= {"payment_intent": payment_intent, "charge": None, "paid": True}
    return found | extra


def invoice_payment(
    payment_id: str, *, invoice: str, payment_intent: str, at: int, status: str = "paid", is_default: bool = True
) -> dict[str, Any]:
    """An InvoicePayment (API 2025-03-31 on): which PaymentIntent paid (part of) an invoice."""
    return {
        "id": payment_id,
        "object": "invoice_payment",
        "amount_paid": 4999 if status == "paid" else None,
        "amount_requested": 4999,
        "created": at,
        "currency": "usd",
        "invoice": invoice,
        "is_default": is_default,
        "livemode": True,
        "payment": {"type": "payment_intent", "payment_intent": payment_intent},
        "status": status,
        "status_transitions": {"canceled_at": None, "paid_at": at if status == "paid" else None},
    }


def refunded_charge(charge_id: str, *, payment_intent: str, at: int, customer: str = "cus_9") -> dict[str, Any]:
    """A Charge of USD 49.99 refunded in full (API 2022-11-15 on: its refunds not included)."""
    return {
        "id": charge_id,
        "object": "charge",
        "livemode": True,
        "payment_intent": payment_intent,
        "amount": 4999,
        "amount_refunded": 4999,
        "refunded": True,
        "currency": "usd",
        "customer": customer,
        "metadata": {},
        "created": at,
    }
