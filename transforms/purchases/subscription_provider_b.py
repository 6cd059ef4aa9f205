"""`subscription_provider_b` (Adapty): webhook events to `StoreFact`s and canonical events, pure, no I/O.

The body (Adapty docs, "Webhook event types and fields", adaptyteam/adapty-docs): `profile_id`
(Adapty's user id), `customer_user_id` (the app's, null when never set), `event_type`,
`event_datetime` (ISO 8601, `2020-07-10T15:00:00.000000+0000`), `event_properties` with
`profile_event_id` ("unique event ID that can be used for deduplication"), `store`
(`app_store`, `play_store`, `stripe`), `environment` (`Sandbox` | `Production`),
`vendor_product_id`, `transaction_id`, `original_transaction_id` (the renewal chain's first),
`purchase_date`, `subscription_expires_at`, `price_usd`, `price_local`, `currency`,
`proceeds_usd`, `cancellation_reason`, `profile_country`, `store_country`, ...; the
`access_level_updated` event has its own properties (`access_level_id`, `is_active`,
`expires_at` "when the access will expire", `is_in_grace_period`, `is_lifetime`, `is_refund`,
`will_renew`, `original_transaction_id`, `vendor_product_id`, ...).

A purchase is named by `original_transaction_id`. What each type states:
- `subscription_started`, `subscription_renewed`, `trial_started`, `trial_converted`,
  `subscription_renewal_reactivated`, `billing_issue_detected`, `entered_grace_period`,
  `subscription_paused`: access until `subscription_expires_at` (trial for `trial_started`).
  The grace events carry no grace end: Adapty states it in `access_level_updated`'s
  `expires_at` with `is_in_grace_period`, which is applied as the grace period's end.
- `subscription_renewal_cancelled`, `trial_renewal_cancelled`: auto-renew off, access kept.
- `subscription_expired`, `trial_expired`: access ended (at the expiry, or the event's time).
- `subscription_refunded`, `non_subscription_purchase_refunded`: revoked at the event's time.
- `non_subscription_purchase`: a one-time purchase, recorded as lifetime (a consumable cannot
  be told apart in the event).

Canonical events are the S3 export's (`transforms.integrations.subscription_provider_b.map_row`
on the same fields), so a webhook and an export row of one transaction land once. They name the
purchase (`purchase_key`: the original transaction id, the ledger's `store_key`) and the
transaction (`transaction_id`; a refund's is the refunded one, as Adapty's event names it); a
period's event carries `subscription_expires_at` as `period_ends_at`. No `billing_period`: the
documented event properties name no period length. The fact states the local price
(`price_local`, `currency`; else `price_usd`) of a paid start, renewal, conversion or one-time
purchase at its `purchase_date`: none in a trial or for the other types (the ledger keeps its).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from transforms.entitlements.facts import SUBSCRIPTION_PROVIDER_B, Channel, StoreFact
from transforms.events import CanonicalEvent
from transforms.integrations.subscription_provider_b import map_row, parse_datetime

ACCESS_LEVEL_UPDATED = "access_level_updated"
CHANNELS: Mapping[str, Channel] = {"app_store": "iap", "play_store": "iap", "stripe": "web"}
_ACCESS = frozenset(
    {
        "subscription_started",
        "subscription_initial_purchase",
        "subscription_renewed",
        "trial_started",
        "trial_converted",
        "subscription_renewal_reactivated",
        "billing_issue_detected",
        "entered_grace_period",
        "subscription_paused",
    }
)
_RENEWAL_OFF = frozenset({"subscription_renewal_cancelled", "trial_renewal_cancelled"})
_EXPIRED = frozenset({"subscription_expired", "trial_expired"})
_REFUNDED = frozenset({"subscription_refunded", "non_subscription_purchase_refunded"})
_ONE_TIME = frozenset({"non_subscription_purchase", "non_subscription_purchase_refunded"})
HANDLED_TYPES = _ACCESS | _RENEWAL_OFF | _EXPIRED | _REFUNDED | _ONE_TIME | {ACCESS_LEVEL_UPDATED}
# The types that state a payment: their price is the purchase's latest paid price.
_PAID = frozenset(
    {
        "subscription_started",
        "subscription_initial_purchase",
        "subscription_renewed",
        "trial_converted",
        "non_subscription_purchase",
    }
)


class NotAnEvent(ValueError):
    """The body is not an Adapty webhook event."""


@dataclass(frozen=True)
class Event:
    raw: Mapping[str, Any]
    properties: Mapping[str, Any]
    type: str
    at: datetime
    dedup_key: str | None  # `profile_event_id`


def parse(body: object) -> Event | None:
    """The event; None for a body without an event type (Adapty's check when the webhook is
    saved carries none)."""
    if not isinstance(body, Mapping):
        raise NotAnEvent("the body is not a JSON object")
    kind = body.get("event_type")
    if kind is None:
        return None
    props = body.get("event_properties")
    props = props if isinstance(props, Mapping) else {}
    at = parse_datetime(_str(body.get("event_datetime")) or _str(props.get("event_datetime")))
    if not isinstance(kind, str) or not kind or at is None:
        raise NotAnEvent("the event has no event_type or no valid event_datetime")
    return Event(body, props, kind.strip().lower(), at, _str(props.get("profile_event_id")))


def _str(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def user_of(event: Event) -> str | None:
    return _str(event.raw.get("customer_user_id"))


def _amount(value: object) -> float | None:
    """An amount Adapty writes as a number (or, in some payloads, a numeric string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def paid_price(event: Event) -> tuple[float, str] | None:
    """What a paid event's buyer paid: the local price and currency, else the USD price."""
    p = event.properties
    if event.type not in _PAID:
        return None
    local, currency = _amount(p.get("price_local")), _str(p.get("currency"))
    if local is not None and local > 0 and currency is not None and len(currency) == 3:
        return local, currency.upper()
    usd = _amount(p.get("price_usd"))
    return (usd, "USD") if usd is not None and usd > 0 else None


def fact(event: Event) -> StoreFact | None:
    """What the event states about its purchase; None for types that state nothing about one."""
    p = event.properties
    key = _str(p.get("original_transaction_id")) or _str(p.get("transaction_id"))
    if event.type not in HANDLED_TYPES or key is None:
        return None
    expires = parse_datetime(_str(p.get("subscription_expires_at")))
    lifetime = event.type in _ONE_TIME or (event.type == ACCESS_LEVEL_UPDATED and p.get("is_lifetime") is True)
    auto_renew: bool | None = None
    grace = revoked = None
    reason = None
    if event.type == ACCESS_LEVEL_UPDATED:
        access_ends = parse_datetime(_str(p.get("expires_at")))
        if p.get("is_in_grace_period") is True and access_ends is not None:
            grace = access_ends
        elif access_ends is not None:
            expires = access_ends
        if p.get("is_active") is False and not lifetime:
            expires = min(expires, event.at) if expires is not None else event.at
        if isinstance(p.get("will_renew"), bool):
            auto_renew = p["will_renew"]
        if p.get("is_refund") is True:
            revoked, reason = event.at, "refund"
    elif event.type in _RENEWAL_OFF:
        auto_renew = False
    elif event.type in _EXPIRED:
        auto_renew = False
        expires = min(expires, event.at) if expires is not None else event.at
    elif event.type in _REFUNDED:
        revoked, reason = event.at, "refund"
    elif event.type in ("subscription_started", "subscription_renewed", "trial_converted", "trial_started"):
        auto_renew = True
    if not lifetime and expires is None:
        return None
    price = paid_price(event)
    return StoreFact(
        source=SUBSCRIPTION_PROVIDER_B,
        store_key=key,
        product_id=_str(p.get("vendor_product_id")),
        kind="lifetime" if lifetime else "subscription",
        channel=CHANNELS.get(_str(p.get("store")) or "", "iap"),
        environment="sandbox" if (_str(p.get("environment")) or "").lower() == "sandbox" else "production",
        stated_at=event.at,
        expires_at=None if lifetime else expires,
        grace_ends_at=grace,
        revoked_at=revoked,
        revocation_reason=reason,
        in_trial=event.type == "trial_started",
        auto_renew=auto_renew,
        transaction_id=_str(p.get("transaction_id")),
        user_hint=user_of(event),
        customer_id=_str(event.raw.get("profile_id")) or _str(p.get("profile_id")),  # Adapty's profile
        price_amount=price[0] if price else None,
        price_currency=price[1] if price else None,
        priced_at=(parse_datetime(_str(p.get("purchase_date"))) or event.at) if price else None,
    )


def export_row(event: Event) -> dict[str, str]:
    """The event as the S3 export's row would carry it (the columns `map_row` reads)."""
    p, raw = event.properties, event.raw
    attribution: Mapping[str, Any] = {}
    sources = raw.get("attributions")
    if isinstance(sources, Mapping):
        attribution = next((v for v in sources.values() if isinstance(v, Mapping)), {})
    values: dict[str, object] = {
        "profile_id": raw.get("profile_id") or p.get("profile_id"),
        "customer_user_id": raw.get("customer_user_id"),
        "event_type": event.type,
        "event_datetime": event.at.isoformat(),
        "transaction_id": p.get("transaction_id"),
        "original_transaction_id": p.get("original_transaction_id"),
        "subscription_expires_at": p.get("subscription_expires_at"),
        "environment": p.get("environment"),
        "revenue_usd": p.get("price_usd"),
        "proceeds_usd": p.get("proceeds_usd"),
        "revenue_local": p.get("price_local"),
        "currency": p.get("currency"),
        "store": p.get("store"),
        "product_id": p.get("vendor_product_id"),
        "profile_country": p.get("profile_country"),
        "store_country": p.get("store_country"),
        "idfa": raw.get("idfa"),
        "advertising_id": raw.get("advertising_id"),
        "paywall_name": p.get("paywall_name"),
        "attribution_campaign": attribution.get("campaign"),
        "attribution_ad_group": attribution.get("ad_group"),
        "attribution_ad_set": attribution.get("ad_set"),
        "attribution_creative": attribution.get("creative"),
    }
    return {k: str(v) for k, v in values.items() if v is not None and not isinstance(v, bool) and str(v) != ""}


def events(event: Event, *, workspace_id: str, user_id: str | None, received_at: datetime) -> list[CanonicalEvent]:
    """The event's canonical event, as the export maps it, for the purchase's user in the ledger."""
    mapped = map_row(
        export_row(event), workspace_id=workspace_id, source=SUBSCRIPTION_PROVIDER_B, received_at=received_at
    )
    if not isinstance(mapped, CanonicalEvent):
        return []
    return [replace(mapped, user_id=user_id) if user_id else mapped]
