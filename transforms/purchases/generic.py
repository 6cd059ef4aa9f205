"""`generic-subscription` and `generic-attribution` (FloKit's own JSON formats, no vendor): pure, no I/O.

A billing system FloKit has no adapter for posts these, signed with FloKit's `Service-Signature`
scheme (`transforms.webhooks.verify`) under the app's generic secret, to
`/api/providers/generic-subscription/webhook?app=<app id>` or
`/api/integrations/mmp/generic-attribution?app=<app id>`.

**generic-subscription**, one purchase event per request:

    {"id": "evt_1",                    sender's unique id of this notification (dedup)
     "type": "purchase",               purchase | renewal | cancellation | uncancellation |
                                       expiration | refund | grace_period
     "user_id": "u_42",                the app's user id
     "purchase_id": "sub_9",           the purchase's lasting id (the same for its renewals)
     "product_id": "pro_monthly",
     "kind": "subscription",           subscription (default) | lifetime | consumable
     "channel": "web",                 web (default) | iap | promotional
     "environment": "production",      production (default) | sandbox
     "occurred_at": "2026-05-01T10:00:00Z",
     "expires_at": "2026-06-01T10:00:00Z",      required for a subscription
     "grace_ends_at": null,            grace_period: access kept until then
     "in_trial": false,
     "billing_period": "monthly",      optional: weekly | monthly | quarterly | yearly | ISO 8601 (P2W)
     "revenue": 9.99, "currency": "EUR"}       purchase / renewal / refund (the amount refunded)

`occurred_at` orders the statements about one purchase (the latest wins). A `purchase` of a
subscription lands `subscription_start` (`trial_start` when `in_trial`), of anything else
`purchase`; `renewal` lands `renewal` (`trial_converted` when it ends a trial: `"converted":
true`); `cancellation` (auto-renew off) lands `cancellation`; `refund` revokes and lands `refund`
with the amount negative; `expiration` and `grace_period` change access only. Event ids are
`generic:<purchase_id>:<id>:<type>` (hashed when longer than 80 characters). A period's events
carry its `expires_at` as `period_ends_at`, and `billing_period` (as an ISO 8601 duration) when
the sender names it: what subscription metrics read (transforms/subscriptions/billing.py).
Every event carries `purchase_key` (the `purchase_id`, the ledger's `store_key` of the
purchase) and, for a purchase or renewal, `transaction_id` (the notification's `id`, which the
ledger records as the purchase's latest transaction; a refund names no transaction of its own).
A paid `purchase` or `renewal` states its `revenue` and `currency` as the purchase's price in the
ledger (`StoreFact.price_amount`; none in a trial).

**generic-attribution**, one attribution event per request, mapped as an ingest callback is
(`transforms.ingest.attribution.check_fields`): `{"id", "event_type" (a canonical type:
install, reattribution, trial_start, ...), "occurred_at" (ISO 8601 or Unix seconds),
"user_id", "adid", "idfa", "gps_adid", "platform" (ios | android), "country" (ISO alpha-2),
"revenue", "currency", "network", "campaign", "adgroup", "creative"}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from transforms import event_types as t
from transforms.entitlements.facts import CHANNELS, GENERIC_SUBSCRIPTION, KINDS, Kind, StoreFact
from transforms.events import CanonicalEvent, canonical_event, lake_can_hold
from transforms.ingest.attribution import (
    ATTRIBUTION_LEVELS,
    MAX_IDENTIFIER,
    Dropped,
    check_fields,
    parse_created_at,
    platform,
    stable_event_id,
)
from transforms.purchases import event_ids
from transforms.subscriptions.billing import BillingPeriod, BillingPeriodError, parse_billing_period
from transforms.timefmt import iso_z

GENERIC_ATTRIBUTION = "generic-attribution"
ID_PREFIX = "generic"
# The events that begin a period of a subscription: they say until when (and, named, how long).
PERIOD_TYPES = frozenset({t.SUBSCRIPTION_START, t.TRIAL_START, t.RENEWAL, t.TRIAL_CONVERTED})
TYPES = ("purchase", "renewal", "cancellation", "uncancellation", "expiration", "refund", "grace_period")
MAX_ID = 200


class Invalid(ValueError):
    """The body does not follow the documented format; the message names the field."""


@dataclass(frozen=True)
class SubscriptionEvent:
    id: str
    type: str
    user_id: str
    purchase_id: str
    product_id: str | None
    kind: Kind
    channel: Any
    environment: Any
    occurred_at: datetime
    expires_at: datetime | None
    grace_ends_at: datetime | None
    in_trial: bool
    converted: bool
    revenue: float | None
    currency: str | None
    billing_period: BillingPeriod | None = None


def _text(body: Mapping[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise Invalid(f"{name} is required")
        return None
    if not isinstance(value, str) or len(value) > MAX_ID or value != value.strip():
        raise Invalid(f"{name} must be a string of at most {MAX_ID} characters")
    return value


def _time(body: Mapping[str, Any], name: str, *, required: bool = False) -> datetime | None:
    raw = _text(body, name, required=required)
    if raw is None:
        return None
    parsed = parse_created_at(raw)
    if parsed is None:
        raise Invalid(f"{name} must be an ISO 8601 time")
    return parsed


def _choice(body: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = _text(body, name) or default
    if value not in allowed:
        raise Invalid(f"{name} must be one of {', '.join(allowed)}")
    return value


def parse_subscription(body: object) -> SubscriptionEvent:
    """The documented generic-subscription event, checked field by field."""
    if not isinstance(body, Mapping):
        raise Invalid("the body must be a JSON object")
    kind: Kind = _choice(body, "kind", KINDS, "subscription")  # type: ignore[assignment]
    occurred = _time(body, "occurred_at", required=True)
    assert occurred is not None
    event_type = _choice(body, "type", TYPES, "")
    expires = _time(body, "expires_at")
    if kind == "subscription" and expires is None:
        raise Invalid("expires_at is required for a subscription")
    revenue = body.get("revenue")
    if revenue is not None and (isinstance(revenue, bool) or not isinstance(revenue, int | float) or revenue < 0):
        raise Invalid("revenue must be a number, at least 0")
    currency = _text(body, "currency")
    if revenue is not None and (currency is None or len(currency) != 3 or not currency.isalpha()):
        raise Invalid("currency (ISO 4217) is required with revenue")
    for flag in ("in_trial", "converted"):
        if body.get(flag) is not None and not isinstance(body.get(flag), bool):
            raise Invalid(f"{flag} must be true or false")
    named_period = _text(body, "billing_period")
    try:
        billing_period = parse_billing_period(named_period) if named_period is not None else None
    except BillingPeriodError as exc:
        raise Invalid(str(exc)) from None
    return SubscriptionEvent(
        id=_text(body, "id", required=True) or "",
        type=event_type,
        user_id=_text(body, "user_id", required=True) or "",
        purchase_id=_text(body, "purchase_id", required=True) or "",
        product_id=_text(body, "product_id"),
        kind=kind,
        channel=_choice(body, "channel", CHANNELS, "web"),
        environment=_choice(body, "environment", ("production", "sandbox"), "production"),
        occurred_at=occurred,
        expires_at=expires,
        grace_ends_at=_time(body, "grace_ends_at"),
        in_trial=bool(body.get("in_trial")),
        converted=bool(body.get("converted")),
        revenue=float(revenue) if revenue is not None else None,
        currency=currency.upper() if currency else None,
        billing_period=billing_period,
    )


def subscription_fact(event: SubscriptionEvent) -> StoreFact:
    expires = event.expires_at
    if event.type == "expiration" and expires is not None:
        expires = min(expires, event.occurred_at)
    auto_renew: bool | None = None
    paid = event.type in ("purchase", "renewal") and not event.in_trial and event.revenue is not None
    if event.type in ("purchase", "renewal", "uncancellation"):
        auto_renew = event.kind == "subscription"
    elif event.type in ("cancellation", "expiration", "refund"):
        auto_renew = False
    return StoreFact(
        source=GENERIC_SUBSCRIPTION,
        store_key=event.purchase_id,
        product_id=event.product_id,
        kind=event.kind,
        channel=event.channel,
        environment=event.environment,
        stated_at=event.occurred_at,
        expires_at=expires,
        grace_ends_at=event.grace_ends_at if event.type == "grace_period" else None,
        revoked_at=event.occurred_at if event.type == "refund" else None,
        revocation_reason="refund" if event.type == "refund" else None,
        in_trial=event.in_trial,
        auto_renew=auto_renew,
        transaction_id=event.id,
        user_hint=event.user_id,
        price_amount=event.revenue if paid else None,
        price_currency=event.currency if paid else None,
        priced_at=event.occurred_at if paid else None,
        billing_period=event.billing_period.iso if event.billing_period and event.kind == "subscription" else None,
    )


def event_id(raw: str, event_type: str) -> str:
    return event_ids.event_id(ID_PREFIX, raw, event_type)


def subscription_events(
    event: SubscriptionEvent, *, workspace_id: str, user_id: str | None, received_at: datetime
) -> list[CanonicalEvent]:
    if event.environment == "sandbox" or not lake_can_hold(event.occurred_at, received_at):
        return []
    kind: str | None = None
    if event.type == "purchase":
        if event.kind == "subscription":
            kind = t.TRIAL_START if event.in_trial else t.SUBSCRIPTION_START
        else:
            kind = t.PURCHASE
    elif event.type == "renewal":
        kind = t.TRIAL_CONVERTED if event.converted else t.RENEWAL
    elif event.type == "cancellation":
        kind = t.CANCELLATION
    elif event.type == "refund":
        kind = t.REFUND
    if kind is None:
        return []
    properties: dict[str, Any] = {
        "product_id": event.product_id,
        "purchase_id": event.purchase_id,
        "purchase_key": event.purchase_id,
        "transaction_id": event.id if event.type in ("purchase", "renewal") else None,
    }
    if kind in PERIOD_TYPES and event.kind == "subscription":
        properties["period_ends_at"] = iso_z(event.expires_at)
        properties["billing_period"] = event.billing_period.iso if event.billing_period else None
    if event.revenue is not None and kind != t.TRIAL_START:
        properties |= {"revenue": -event.revenue if kind == t.REFUND else event.revenue, "currency": event.currency}
    return [
        canonical_event(
            event_id=event_id(f"{event.purchase_id}:{event.id}", kind),
            workspace_id=workspace_id,
            event_type=kind,
            occurred_at=event.occurred_at,
            source=GENERIC_SUBSCRIPTION,
            received_at=received_at,
            user_id=user_id or event.user_id,
            properties={k: v for k, v in properties.items() if v is not None},
        )
    ]


def attribution_id(body: object) -> str:
    if not isinstance(body, Mapping):
        raise Invalid("the body must be a JSON object")
    return _text(body, "id", required=True) or ""


def attribution_event(
    body: Mapping[str, Any],
    *,
    app_id: str,
    workspace_id: str,
    received_at: datetime,
    latest_rates: Mapping[str, float],
) -> CanonicalEvent | Dropped:
    """The attribution event as a canonical event, or why it is dropped (the ingest reasons)."""
    raw_id = attribution_id(body)
    event_type = _text(body, "event_type", required=True)
    if event_type not in t.CANONICAL_EVENT_TYPES:
        return Dropped("unmapped_event")
    occurred = body.get("occurred_at")
    revenue = body.get("revenue")
    checked = check_fields(
        event_type,
        time=str(occurred) if isinstance(occurred, str | int | float) and not isinstance(occurred, bool) else None,
        country_value=_text(body, "country"),
        currency=_text(body, "currency"),
        revenue=revenue,
        received_at=received_at,
        latest_rates=latest_rates,
    )
    if isinstance(checked, Dropped):
        return checked
    identity = {name: _text(body, name) for name in ("user_id", "adid", "idfa", "gps_adid")}
    levels = {level: _text(body, level) for level in ATTRIBUTION_LEVELS}
    return canonical_event(
        event_id=stable_event_id(GENERIC_ATTRIBUTION, app_id, raw_id),
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=checked.occurred_at,
        source=GENERIC_ATTRIBUTION,
        received_at=received_at,
        platform=platform(_text(body, "platform")),
        country=checked.country,
        properties={
            "revenue": checked.amount,
            "currency": checked.currency,
            **{k: v for k, v in levels.items() if v is not None and len(v) <= MAX_IDENTIFIER},
        },
        **identity,
    )
