"""`subscription_provider_a` (RevenueCat): webhook events to `StoreFact`s and canonical events, pure, no I/O.

The body is `{"api_version": "1.0", "event": {...}}` (RevenueCat docs, "Event Types and
Fields" and "Sample Events"). An event carries `id` (the same on every retry), `type`,
`app_user_id` (the app's user id, `Purchases.logIn`), `product_id`, `period_type` (`TRIAL`,
`INTRO`, `NORMAL`, `PROMOTIONAL`, `PREPAID`), `purchased_at_ms`, `expiration_at_ms`,
`event_timestamp_ms`, `environment` (`SANDBOX` | `PRODUCTION`), `store`, `transaction_id`,
`original_transaction_id`, `price` (USD), `price_in_purchased_currency`, `currency`,
`country_code`, and per type `is_trial_conversion` (RENEWAL), `cancel_reason` (CANCELLATION:
`UNSUBSCRIBE`, `BILLING_ERROR`, `DEVELOPER_INITIATED`, `PRICE_INCREASE`, `CUSTOMER_SUPPORT`,
`UNKNOWN`), `expiration_reason` (EXPIRATION), `grace_period_expiration_at_ms` (BILLING_ISSUE),
`new_product_id` (PRODUCT_CHANGE), `transferred_from` / `transferred_to` (TRANSFER: app user
ids, no purchase named).

A purchase is named by `original_transaction_id` (the store's, the same across renewals).
What each type states:
- INITIAL_PURCHASE, RENEWAL, UNCANCELLATION, PRODUCT_CHANGE, SUBSCRIPTION_PAUSED (RevenueCat:
  "you should not revoke access when receiving a SUBSCRIPTION_PAUSED event"): access until
  `expiration_at_ms`; `period_type` TRIAL is a trial.
- CANCELLATION: auto-renew off, access until the expiry; with `cancel_reason`
  CUSTOMER_SUPPORT it is a refund: revoked at the event's time.
- EXPIRATION: access ended at `expiration_at_ms` (or the event's time, if earlier).
- BILLING_ISSUE: the grace period RevenueCat reports (`grace_period_expiration_at_ms`).
- NON_RENEWING_PURCHASE: a one-time purchase; lifetime unless RevenueCat gives it an expiry
  (a non-renewing subscription). Consumables cannot be told apart and are recorded as
  lifetime (RevenueCat's entitlements make the same choice per product, not per event).
- TRANSFER: the purchases of the `transferred_from` users move to the first of
  `transferred_to` (the handler finds them in the ledger and restates each as moved).
- TEST: nothing.

Canonical events reuse the RevenueCat sync's ids (`transforms.integrations.subscription_provider_a.event_id`:
`rc:<store transaction id>:<type>`; a cancellation by the original transaction id), so a
webhook and a sync of one transaction land once. Revenue is `price`, RevenueCat's USD figure,
as the sync books it; the purchased currency's amount is kept beside it. Sandbox events change
the ledger (an app's testers need access) but land no events, like the sync.

Every event names its purchase as `purchase_key` (the fact's `store_key`: the original
transaction id) and its `transaction_id` (a refund's is the refunded period's: RevenueCat sends
the CANCELLATION of a refund only for the latest period). A period's event (INITIAL_PURCHASE,
RENEWAL) carries `expiration_at_ms` as `period_ends_at`; RevenueCat's events name no period
length, so no `billing_period`. The fact states the purchased currency's price
(`price_in_purchased_currency`, `currency`; else the USD `price`) of a paid INITIAL_PURCHASE,
RENEWAL or NON_RENEWING_PURCHASE at `purchased_at_ms`; none in a trial (`period_type` TRIAL) or
for the other types, which keep the ledger's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from transforms import event_types as t
from transforms.entitlements.facts import SUBSCRIPTION_PROVIDER_A, Channel, StoreFact
from transforms.events import CanonicalEvent, lake_can_hold
from transforms.ingest.validation import valid_country
from transforms.integrations.subscription_provider_a import event_id, moment
from transforms.timefmt import iso_z

TEST = "TEST"
TRANSFER = "TRANSFER"
CHANNELS: Mapping[str, Channel] = {
    "APP_STORE": "iap",
    "MAC_APP_STORE": "iap",
    "PLAY_STORE": "iap",
    "AMAZON": "iap",
    "STRIPE": "web",
    "RC_BILLING": "web",
    "PADDLE": "web",
    "PROMOTIONAL": "promotional",
}
PLATFORMS = {"APP_STORE": "ios", "MAC_APP_STORE": "ios", "PLAY_STORE": "android"}
# Types whose fact keeps auto-renew as it was stated before (None: not stated by this event).
_ACCESS_TYPES = frozenset({"INITIAL_PURCHASE", "RENEWAL", "UNCANCELLATION", "PRODUCT_CHANGE", "SUBSCRIPTION_PAUSED"})
HANDLED_TYPES = frozenset(
    {*_ACCESS_TYPES, "CANCELLATION", "EXPIRATION", "BILLING_ISSUE", "NON_RENEWING_PURCHASE", TRANSFER, TEST}
)
# The types that state a payment (a trial's INITIAL_PURCHASE aside).
_PAID_TYPES = frozenset({"INITIAL_PURCHASE", "RENEWAL", "NON_RENEWING_PURCHASE"})


class NotAnEvent(ValueError):
    """The body is not a RevenueCat webhook event."""


@dataclass(frozen=True)
class Event:
    """The `event` object of a webhook body, with what every type needs pulled out."""

    raw: Mapping[str, Any]
    id: str
    type: str
    at: datetime  # event_timestamp_ms


def parse(body: object) -> Event:
    if not isinstance(body, Mapping) or not isinstance(body.get("event"), Mapping):
        raise NotAnEvent('the body is not a RevenueCat webhook ({"api_version", "event"})')
    event = body["event"]
    event_id_, kind, at = event.get("id"), event.get("type"), moment(event.get("event_timestamp_ms"))
    if not isinstance(event_id_, str) or not event_id_ or not isinstance(kind, str) or not kind:
        raise NotAnEvent("the event has no id or type")
    if at is None:
        raise NotAnEvent("the event has no event_timestamp_ms")
    return Event(event, event_id_, kind, at)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _user(event: Mapping[str, Any]) -> str | None:
    """The app's user id; RevenueCat's anonymous ids (`$RCAnonymousID:`) name no app user."""
    user = _str(event.get("app_user_id"))
    return None if user is None or user.startswith("$RCAnonymousID:") else user


def purchase_key(event: Mapping[str, Any]) -> str | None:
    """The purchase an event is about, as the ledger keys it: the original transaction id."""
    return _str(event.get("original_transaction_id")) or _str(event.get("transaction_id"))


def paid_price(event: Event) -> tuple[float, str] | None:
    """The price the event's payment stated, in the purchased currency where RevenueCat gives it
    (else its USD figure); None for a trial, a free period or a type that states no payment."""
    e = event.raw
    if event.type not in _PAID_TYPES or e.get("period_type") == "TRIAL":
        return None
    local, currency = _number(e.get("price_in_purchased_currency")), _str(e.get("currency"))
    if local is not None and local > 0 and currency is not None:
        return local, currency.upper()
    usd = _number(e.get("price"))
    return (usd, "USD") if usd is not None and usd > 0 else None


def fact(event: Event) -> StoreFact | None:
    """What the event states about its purchase; None for types that name no purchase."""
    e = event.raw
    key = purchase_key(e)
    if event.type not in HANDLED_TYPES or event.type in (TEST, TRANSFER) or key is None:
        return None
    expires = moment(e.get("expiration_at_ms"))
    store = str(e.get("store") or "").upper()
    kind: Any = "subscription"
    auto_renew: bool | None = None
    grace = revoked = None
    reason = None
    refund = event.type == "CANCELLATION" and e.get("cancel_reason") == "CUSTOMER_SUPPORT"
    if event.type == "NON_RENEWING_PURCHASE" or (refund and expires is None):
        # A one-time purchase (its refund carries no expiry either): lifetime unless it expires.
        kind = "subscription" if expires is not None else "lifetime"
        auto_renew = False
    elif expires is None:
        return None  # a subscription event without an expiry states nothing usable
    if event.type in ("INITIAL_PURCHASE", "RENEWAL", "UNCANCELLATION"):
        auto_renew = True
    elif event.type == "CANCELLATION":
        auto_renew = False
        if refund:
            revoked, reason = event.at, "refund"
    elif event.type == "EXPIRATION":
        auto_renew = False
        expires = min(expires, event.at) if expires is not None else event.at
    elif event.type == "BILLING_ISSUE":
        grace = moment(e.get("grace_period_expiration_at_ms"))
    price = paid_price(event)
    return StoreFact(
        source=SUBSCRIPTION_PROVIDER_A,
        store_key=key,
        product_id=_str(e.get("product_id")),
        kind=kind,
        channel=CHANNELS.get(store, "iap"),
        environment="sandbox" if e.get("environment") == "SANDBOX" else "production",
        stated_at=event.at,
        expires_at=expires,
        grace_ends_at=grace,
        revoked_at=revoked,
        revocation_reason=reason,
        in_trial=e.get("period_type") == "TRIAL",
        auto_renew=auto_renew,
        transaction_id=_str(e.get("transaction_id")),
        user_hint=_user(e),
        # RevenueCat's customer (anonymous ids included): what its dashboard shows support.
        customer_id=_str(e.get("original_app_user_id")) or _str(e.get("app_user_id")),
        price_amount=price[0] if price else None,
        price_currency=price[1] if price else None,
        priced_at=(moment(e.get("purchased_at_ms")) or event.at) if price else None,
    )


def transfer_users(event: Event) -> tuple[tuple[str, ...], str | None]:
    """A TRANSFER's previous owners and its new one (the first app user id it names)."""

    def ids(value: object) -> tuple[str, ...]:
        return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, Sequence) else ()

    to = [u for u in ids(event.raw.get("transferred_to")) if not u.startswith("$RCAnonymousID:")]
    return ids(event.raw.get("transferred_from")), (to[0] if to else None)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def events(event: Event, *, workspace_id: str, user_id: str | None, received_at: datetime) -> list[CanonicalEvent]:
    """The canonical events of one webhook event (see the module docstring)."""
    e = event.raw
    if e.get("environment") == "SANDBOX":
        return []
    transaction = _str(e.get("transaction_id"))
    original = _str(e.get("original_transaction_id")) or transaction
    user = user_id or _user(e)
    price = _number(e.get("price"))
    money = event.type in ("INITIAL_PURCHASE", "RENEWAL", "NON_RENEWING_PURCHASE")
    kind: str | None = None
    raw = transaction
    occurred = moment(e.get("purchased_at_ms")) or event.at
    if event.type == "INITIAL_PURCHASE":
        kind = t.TRIAL_START if e.get("period_type") == "TRIAL" else t.SUBSCRIPTION_START
        money = kind != t.TRIAL_START
    elif event.type == "RENEWAL":
        kind = t.TRIAL_CONVERTED if e.get("is_trial_conversion") else t.RENEWAL
    elif event.type == "NON_RENEWING_PURCHASE":
        kind = t.PURCHASE
    elif event.type == "CANCELLATION" and e.get("cancel_reason") == "CUSTOMER_SUPPORT":
        kind, occurred = t.REFUND, event.at
        price = -abs(price) if price is not None else None
        money = True
    elif event.type == "CANCELLATION":
        kind, raw, occurred = t.CANCELLATION, original, event.at
    if kind is None or raw is None or not lake_can_hold(occurred, received_at):
        return []
    store = str(e.get("store") or "").upper()
    country = e.get("country_code")
    local = _number(e.get("price_in_purchased_currency"))
    currency = _str(e.get("currency"))
    properties: dict[str, Any] = {
        "product_id": _str(e.get("product_id")),
        "store": store.lower() or None,
        "transaction_id": transaction,
        "original_transaction_id": original,
        "purchase_key": purchase_key(e),
        "vendor_event": event.type,
    }
    if kind in (t.TRIAL_START, t.SUBSCRIPTION_START, t.RENEWAL, t.TRIAL_CONVERTED):
        properties["period_ends_at"] = iso_z(moment(e.get("expiration_at_ms")))
    if money and price is not None:
        properties |= {"revenue": price, "currency": "USD"}
        if local is not None and currency:
            properties |= {"local_revenue": -abs(local) if kind == t.REFUND else local, "local_currency": currency}
    return [
        CanonicalEvent(
            event_id=event_id(raw, kind),
            workspace_id=workspace_id,
            event_type=kind,
            occurred_at=occurred,
            source=SUBSCRIPTION_PROVIDER_A,
            received_at=received_at,
            platform=PLATFORMS.get(store),
            country=country if isinstance(country, str) and valid_country(country) else None,
            user_id=user,
            properties={k: v for k, v in properties.items() if v is not None},
        )
    ]
