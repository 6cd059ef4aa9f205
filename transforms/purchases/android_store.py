"""`android_store` (Google Play): purchase resources as ledger facts and canonical events.

The Play Developer API is the source of truth (a real-time developer notification is only a
signal to read it): `purchases.subscriptionsv2.get` answers a `SubscriptionPurchaseV2`,
`purchases.products.get` a `ProductPurchase`. This module maps both, and a voided purchase, to a
`StoreFact`; the HTTP calls live in `api.receipts.android_store` (receipts, notifications) and
`orchestration.syncs.connectors.android_store` (the sync), which build their API client with
`clients.android_store.service_for` and resolve a purchase's key with `resolve_store_key`.

Access by `subscriptionState` (developer.android.com, "Subscription lifecycle"):
- ACTIVE: until the line items' latest `expiryTime`.
- IN_GRACE_PERIOD: a renewal payment failed and Google retries while the user keeps access.
  Google moves `expiryTime` to the grace period's end (as Play subscriptions show it through
  RevenueCat, community.revenuecat.com "SUBSCRIPTION_EXTENDED ... grace period"; no Google page
  stating it was found), so that time is both the expiry and `grace_ends_at` (the paid
  period's own end is not in the resource).
- CANCELED: auto-renew off, access until `expiryTime` (`auto_renew` False).
- ON_HOLD, PAUSED, EXPIRED, PENDING, PENDING_PURCHASE_CANCELED: no access now. Their
  `expiryTime` may lie ahead (a pause starts at the period's end), so the fact ends access at
  the moment of the statement at the latest.
A subscription cancelled because another purchase replaced it (`canceledStateContext.
replacementCancellation`: an upgrade, downgrade or re-signup) states nothing about access: its
successor, whose `linkedPurchaseToken` names it, does (`replaced`).

The purchase's lasting key (`store_key`) is the first purchase token of the subscription: a new
token that links to an earlier one (`linkedPurchaseToken`) continues that purchase. Google
names one hop only; the caller resolves the chain (`api.receipts.android_store.store_key`) and
passes the key in. The token a fact was read from, when Google did not call it replaced, is the
chain's newest: the fact carries it as `current_token`, and the sync re-reads the purchase by it
(the first token of an upgraded subscription answers only "replaced").

Revenue: Google's purchase resources state no charged amount. The only price they carry is an
auto-renewing plan's `recurringPrice` (the base plan's list price, before tax and without
discounts), which is booked on a paid period in the base-price phase; other events (trials,
offers, one-time products, refunds) land without revenue. Test purchases are not revenue and
land no events. Renewal order ids are the base order id with `..N` appended (Google Payments'
order numbering), which is how a renewal is told from the first order; a trial's conversion is
not told apart from a renewal (the resource keeps no past offer phase). The same base-plan price
is the fact's price of the latest paid period (`StoreFact.price_amount`, at the period event's
time); a trial or an offer phase states none, so the ledger keeps the price it held.

Every event names its purchase: `purchase_key` is the resolved `store_key` (the chain's first
token: an upgrade's new token lands under the root's key) and `transaction_id` the order (a
refund's is the voided order). A period's event carries the line item's `expiryTime` as
`period_ends_at`. No `billing_period`: `SubscriptionPurchaseV2` names the base plan
(`offerDetails.basePlanId`) but not its billing period, which only the monetization API's
catalog (`monetization.subscriptions`) states.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from transforms import event_types as t
from transforms.entitlements.effects import Effect
from transforms.entitlements.facts import ANDROID_STORE, StoreFact
from transforms.events import CanonicalEvent, canonical_event, lake_can_hold
from transforms.purchases import event_ids
from transforms.timefmt import iso_z

MAX_CHAIN = 10  # linkedPurchaseToken hops followed to find a subscription's first token
ID_PREFIX = "gp"
PLATFORM = "android"

ACTIVE = "SUBSCRIPTION_STATE_ACTIVE"
IN_GRACE_PERIOD = "SUBSCRIPTION_STATE_IN_GRACE_PERIOD"
CANCELED = "SUBSCRIPTION_STATE_CANCELED"
ON_HOLD = "SUBSCRIPTION_STATE_ON_HOLD"
PAUSED = "SUBSCRIPTION_STATE_PAUSED"
EXPIRED = "SUBSCRIPTION_STATE_EXPIRED"
PENDING = "SUBSCRIPTION_STATE_PENDING"
# States whose expiryTime is the end of access; every other state grants nothing now.
ACCESS_UNTIL_EXPIRY = frozenset({ACTIVE, IN_GRACE_PERIOD, CANCELED})
ACKNOWLEDGEMENT_PENDING = "ACKNOWLEDGEMENT_STATE_PENDING"

# ProductPurchase.purchaseState / consumptionState / purchaseType / acknowledgementState.
PRODUCT_PURCHASED, PRODUCT_CANCELED, PRODUCT_PENDING = 0, 1, 2
PRODUCT_CONSUMED = 1
PRODUCT_TEST = 0
PRODUCT_NOT_ACKNOWLEDGED = 0

# voidedPurchaseNotification.productType
VOIDED_SUBSCRIPTION, VOIDED_ONE_TIME = 1, 2
# voidedPurchaseNotification.refundType; a listed VoidedPurchase with `voidedQuantity` is the second.
FULL_REFUND, QUANTITY_BASED_PARTIAL_REFUND = 1, 2

# Pub/Sub's push tokens: Google-signed OIDC ID tokens, a compact JWS signed RS256 under one of
# the keys at Google's certificates URL (named by `kid`). About 1 KB; anything far longer is not one.
ID_TOKEN_ALGORITHM = "RS256"  # noqa: S105  # an algorithm's name, not a secret
MAX_ID_TOKEN_CHARS = 8192
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
_MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*\"?(\d+)\"?\s*(?:,|$)", re.IGNORECASE)

_RENEWAL_ORDER = re.compile(r"\.\.\d+$")
_FRACTION = re.compile(r"\.(\d{6})\d+")


class UnexpectedPayload(ValueError):
    """The store answered a resource this mapping cannot read (a field it needs is missing)."""


def parse_time(value: object) -> datetime | None:
    """An RFC 3339 timestamp as the API writes them (`Z`, up to nanoseconds)."""
    if not isinstance(value, str) or not value:
        return None
    text = _FRACTION.sub(r".\1", value.replace("Z", "+00:00"))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def parse_millis(value: object) -> datetime | None:
    """Milliseconds since the epoch, as the v1 resources write them (a string)."""
    try:
        return datetime.fromtimestamp(int(str(value)) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError):
        return None


def id_token_header(token: str) -> dict[str, Any] | None:
    """The JOSE header of `token` when it is shaped as Google's ID tokens are (three base64url
    parts, a JSON object header with `alg` RS256 and a `kid`), else None: what is worth fetching
    Google's certificates for. Says nothing about the signature."""
    parts = token.split(".")
    if len(token) > MAX_ID_TOKEN_CHARS or len(parts) != 3 or not all(_BASE64URL.fullmatch(p) for p in parts):
        return None
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or header.get("alg") != ID_TOKEN_ALGORITHM:
        return None
    kid = header.get("kid")
    return header if isinstance(kid, str) and kid else None


def max_age(cache_control: str | None) -> int | None:
    """The `max-age` of a `Cache-Control` value (RFC 9111), None when there is none or the answer
    may not be reused (`no-store`, `no-cache`)."""
    if not cache_control:
        return None
    directives = {d.strip().split("=", 1)[0].lower() for d in cache_control.split(",")}
    if directives & {"no-store", "no-cache"}:
        return None
    found = _MAX_AGE.search(cache_control)
    return int(found.group(1)) if found else None


def confirmed_void(
    listed: Sequence[Mapping[str, Any]], *, token: str, order_id: str | None
) -> Mapping[str, Any] | None:
    """Google's own record (a `VoidedPurchase` of `voidedpurchases.list`) of the void a
    notification announces: the purchase token's, and the order's when the notification names
    one (a subscription's renewals share its token, each order is voided on its own); the
    latest when several match. None: Google does not confirm the void."""
    matching = [
        v for v in listed
        if v.get("purchaseToken") == token and (order_id is None or v.get("orderId") == order_id)
    ]  # fmt: skip
    if not matching:
        return None
    return max(matching, key=lambda v: parse_millis(v.get("voidedTimeMillis")) or datetime.min.replace(tzinfo=UTC))


def refund_type_of(voided: Mapping[str, Any]) -> int:
    """A listed void's refund type: `voidedQuantity` marks a quantity-based partial refund."""
    return QUANTITY_BASED_PARTIAL_REFUND if "voidedQuantity" in voided else FULL_REFUND


def event_id(order_id: str, event_type: str) -> str:
    """`gp:<orderId>:<type>`, or a hash of the order id when that is longer than the lake allows."""
    return event_ids.event_id(ID_PREFIX, order_id, event_type)


def _line_items(purchase: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = purchase.get("lineItems")
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def main_item(purchase: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The line item that decides access: the one that expires last."""
    items = _line_items(purchase)
    if not items:
        return None
    return max(items, key=lambda i: parse_time(i.get("expiryTime")) or datetime.min.replace(tzinfo=UTC))


def replaced(purchase: Mapping[str, Any]) -> bool:
    """Cancelled because a newer purchase (which links to this one) took its place."""
    context = purchase.get("canceledStateContext")
    return isinstance(context, Mapping) and "replacementCancellation" in context


def subscription_pending_acknowledgement(purchase: Mapping[str, Any]) -> bool:
    """A purchase Google refunds after three days unless acknowledged (and one worth acknowledging:
    paid for, not pending)."""
    return (
        purchase.get("acknowledgementState") == ACKNOWLEDGEMENT_PENDING
        and purchase.get("subscriptionState") in ACCESS_UNTIL_EXPIRY
    )


def subscription_fact(purchase: Mapping[str, Any], *, store_key: str, token: str, stated_at: datetime) -> StoreFact:
    """The state a `SubscriptionPurchaseV2` states, read with `token` at `stated_at`, as the
    purchase's fact. Only a purchase that is not `replaced` states anything, so `token` is then
    the subscription's newest (`current_token`)."""
    item = main_item(purchase)
    if item is None:
        raise UnexpectedPayload("the subscription has no line items")
    state = purchase.get("subscriptionState")
    expiry = parse_time(item.get("expiryTime"))
    if state in ACCESS_UNTIL_EXPIRY:
        if expiry is None:
            raise UnexpectedPayload(f"a subscription in {state} without an expiryTime")
        expires_at = expiry
    else:
        expires_at = stated_at if expiry is None else min(expiry, stated_at)
    renewing = item.get("autoRenewingPlan")
    auto_renew = bool(renewing.get("autoRenewEnabled")) if isinstance(renewing, Mapping) else False
    phase = item.get("offerPhase")
    accounts = purchase.get("externalAccountIdentifiers")
    paid = paid_period(purchase, stated_at=stated_at)
    return StoreFact(
        source=ANDROID_STORE,
        store_key=store_key,
        product_id=item.get("productId") if isinstance(item.get("productId"), str) else None,
        kind="subscription",
        channel="iap",
        environment="sandbox" if "testPurchase" in purchase else "production",
        stated_at=stated_at,
        expires_at=expires_at,
        grace_ends_at=expiry if state == IN_GRACE_PERIOD else None,
        in_trial=isinstance(phase, Mapping) and "freeTrial" in phase,
        auto_renew=auto_renew and state != CANCELED,
        account_token=_text(accounts.get("obfuscatedExternalAccountId")) if isinstance(accounts, Mapping) else None,
        transaction_id=order_id_of(purchase),
        current_token=token,
        price_amount=paid[1][0] if paid else None,
        price_currency=paid[1][1] if paid else None,
        priced_at=paid[0] if paid else None,
    )


def period_started_at(purchase: Mapping[str, Any], order: str, stated_at: datetime) -> datetime:
    """When the latest order's period began, as far as the resource says: a renewal order's is
    the statement's time (the resource keeps no renewal time), the first order's `startTime`."""
    if _RENEWAL_ORDER.search(order):
        return stated_at
    return parse_time(purchase.get("startTime")) or stated_at


def paid_period(purchase: Mapping[str, Any], *, stated_at: datetime) -> tuple[datetime, tuple[float, str]] | None:
    """The latest order's period and its price when it is a paid period in the base-price phase
    with access (`recurringPrice`, the only price the resource carries); None otherwise (a
    trial, an introductory or proration phase, no access, no price)."""
    item, order = main_item(purchase), order_id_of(purchase)
    if item is None or order is None or purchase.get("subscriptionState") not in ACCESS_UNTIL_EXPIRY:
        return None
    phase, plan = item.get("offerPhase"), item.get("autoRenewingPlan")
    if not (isinstance(phase, Mapping) and "basePrice" in phase and isinstance(plan, Mapping)):
        return None
    money = _money(plan.get("recurringPrice"))
    return (period_started_at(purchase, order, stated_at), money) if money else None


def order_id_of(purchase: Mapping[str, Any]) -> str | None:
    """The latest successful order: the decisive line item's, else the deprecated `latestOrderId`."""
    item = main_item(purchase)
    if item is not None and _text(item.get("latestSuccessfulOrderId")):
        return str(item["latestSuccessfulOrderId"])
    return _text(purchase.get("latestOrderId"))


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _money(price: object) -> tuple[float, str] | None:
    """A `Money` (`units`, `nanos`, `currencyCode`) as an amount and its currency."""
    if not isinstance(price, Mapping) or not _text(price.get("currencyCode")):
        return None
    try:
        amount = Decimal(str(price.get("units") or 0)) + Decimal(int(price.get("nanos") or 0)) / Decimal(10**9)
    except (ArithmeticError, ValueError, TypeError):
        return None
    return float(amount), str(price["currencyCode"]).upper()


def _event(
    event_type: str,
    order_id: str,
    fact: StoreFact,
    *,
    workspace_id: str,
    user_id: str | None,
    occurred_at: datetime,
    received_at: datetime,
    revenue: tuple[float, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> CanonicalEvent | None:
    if not lake_can_hold(occurred_at, received_at):
        return None
    properties: dict[str, Any] = {
        "revenue": revenue[0] if revenue else None,
        "currency": revenue[1] if revenue else None,
        "product_id": fact.product_id,
        "transaction_id": order_id,
        "original_transaction_id": fact.store_key,
        "purchase_key": fact.store_key,
        "store": "play_store",
        **(extra or {}),
    }
    return canonical_event(
        source=ANDROID_STORE,
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=occurred_at,
        received_at=received_at,
        event_id=event_id(order_id, event_type),
        platform=PLATFORM,
        user_id=user_id,
        properties=properties,
    )


def subscription_events(
    purchase: Mapping[str, Any],
    fact: StoreFact,
    *,
    workspace_id: str,
    user_id: str | None,
    received_at: datetime,
) -> list[CanonicalEvent]:
    """The canonical events the subscription's current state implies, with ids shared by every
    reader of the same state (receipt, notification, sync), so each lands once: the latest
    order as a start (trial or paid) or a renewal, and a user's or Google's cancellation."""
    if fact.environment == "sandbox" or replaced(purchase):
        return []
    state = purchase.get("subscriptionState")
    order = order_id_of(purchase)
    item = main_item(purchase)
    if order is None or item is None:
        return []
    events: list[CanonicalEvent | None] = []
    if state in ACCESS_UNTIL_EXPIRY:
        first = t.TRIAL_START if fact.in_trial else t.SUBSCRIPTION_START
        kind = t.RENEWAL if _RENEWAL_ORDER.search(order) else first
        at = period_started_at(purchase, order, fact.stated_at)
        paid = paid_period(purchase, stated_at=fact.stated_at)
        revenue = paid[1] if paid and kind != t.TRIAL_START else None
        period = {"period_ends_at": iso_z(parse_time(item.get("expiryTime")))}
        events.append(
            _event(kind, order, fact, workspace_id=workspace_id, user_id=user_id, occurred_at=at,
                   received_at=received_at, revenue=revenue, extra=period)
        )  # fmt: skip
    context = purchase.get("canceledStateContext")
    if state == CANCELED and isinstance(context, Mapping):
        user = context.get("userInitiatedCancellation")
        at = (parse_time(user.get("cancelTime")) if isinstance(user, Mapping) else None) or fact.stated_at
        reason = next((k for k in context if k.endswith("Cancellation")), None)
        events.append(
            _event(t.CANCELLATION, order, fact, workspace_id=workspace_id, user_id=user_id, occurred_at=at,
                   received_at=received_at, extra={"cancel_reason": reason})
        )  # fmt: skip
    return [e for e in events if e is not None]


def product_fact(
    purchase: Mapping[str, Any], *, purchase_token: str, product_id: str, stated_at: datetime
) -> StoreFact:
    """A `ProductPurchase` (a one-time product) as the purchase's fact.

    The API does not say whether a product is consumable: an unconsumed purchase grants lasting
    access (`lifetime`, the non-consumable case) until Google reports it consumed; a pending one
    (not paid yet) grants nothing; a cancelled one is revoked."""
    state = purchase.get("purchaseState")
    revoked = state == PRODUCT_CANCELED
    consumed = purchase.get("consumptionState") == PRODUCT_CONSUMED
    return StoreFact(
        source=ANDROID_STORE,
        store_key=purchase_token,
        product_id=_text(purchase.get("productId")) or product_id,
        kind="consumable" if consumed or state == PRODUCT_PENDING else "lifetime",
        channel="iap",
        environment="sandbox" if purchase.get("purchaseType") == PRODUCT_TEST else "production",
        stated_at=stated_at,
        revoked_at=stated_at if revoked else None,
        revocation_reason="canceled" if revoked else None,
        account_token=_text(purchase.get("obfuscatedExternalAccountId")),
        transaction_id=_text(purchase.get("orderId")),
        current_token=purchase_token,
    )


def product_pending_acknowledgement(purchase: Mapping[str, Any]) -> bool:
    return (
        purchase.get("acknowledgementState") == PRODUCT_NOT_ACKNOWLEDGED
        and purchase.get("purchaseState") == PRODUCT_PURCHASED
    )


def product_events(
    purchase: Mapping[str, Any],
    fact: StoreFact,
    *,
    workspace_id: str,
    user_id: str | None,
    received_at: datetime,
) -> list[CanonicalEvent]:
    """A completed one-time purchase as a `purchase` event (no revenue: the resource has no price)."""
    order = _text(purchase.get("orderId"))
    if fact.environment == "sandbox" or order is None or purchase.get("purchaseState") != PRODUCT_PURCHASED:
        return []
    at = parse_millis(purchase.get("purchaseTimeMillis")) or fact.stated_at
    event = _event(t.PURCHASE, order, fact, workspace_id=workspace_id, user_id=user_id, occurred_at=at,
                   received_at=received_at)  # fmt: skip
    return [event] if event is not None else []


def voided_fact(
    previous: StoreFact | None,
    *,
    store_key: str,
    product_type: int | None,
    voided_at: datetime,
    refund_type: int | None,
    current_token: str | None = None,
) -> StoreFact:
    """A voided (refunded, charged back or revoked) purchase: no access from `voided_at`.

    Its other state is what the ledger held (`previous`); a purchase the ledger never saw is
    recorded revoked, so a later receipt of it cannot grant. Stated at the void or at the
    previous statement, whichever is later, so the revocation is never older than the state
    it ends. `current_token`: the voided token, when the caller read it from Google and it was
    not replaced (the chain's newest); else the ledger's stays (a void may name an older token
    of the chain, whose order was refunded)."""
    reason = "voided" if refund_type is None else f"voided:{refund_type}"
    if previous is not None:
        return replace(
            previous,
            stated_at=max(previous.stated_at, voided_at),
            revoked_at=voided_at,
            revocation_reason=reason,
            auto_renew=False if previous.kind == "subscription" else previous.auto_renew,
            current_token=current_token or previous.current_token,
        )
    subscription = product_type != VOIDED_ONE_TIME
    return StoreFact(
        source=ANDROID_STORE,
        store_key=store_key,
        product_id=None,
        kind="subscription" if subscription else "lifetime",
        channel="iap",
        environment="production",
        stated_at=voided_at,
        expires_at=voided_at if subscription else None,
        revoked_at=voided_at,
        revocation_reason=reason,
        auto_renew=False if subscription else None,
        current_token=current_token,
    )


def refund_events(
    fact: StoreFact, order_id: str | None, *, workspace_id: str, user_id: str | None, received_at: datetime
) -> Sequence[CanonicalEvent]:
    """A voided purchase's `refund` (no revenue: the notification carries no amount)."""
    if order_id is None or fact.environment == "sandbox" or fact.revoked_at is None:
        return []
    event = _event(t.REFUND, order_id, fact, workspace_id=workspace_id, user_id=user_id,
                   occurred_at=fact.revoked_at, received_at=received_at)  # fmt: skip
    return [event] if event is not None else []


def resolve_store_key(
    token: str,
    purchase: Mapping[str, Any],
    *,
    held: Callable[[str], str | None],
    linked_of: Callable[[str], object],
) -> str:
    """The subscription's lasting key: the first purchase token of its `linkedPurchaseToken` chain.

    Every grant is recorded under its chain's first token, so the first token on the way back
    that the ledger holds (`held`: its key, or None) is the key (usually the one the purchase
    links to, no API call). Google names one hop per resource: when the ledger knows none,
    earlier tokens are read in turn (`linked_of`: that token's `linkedPurchaseToken`, or None
    when Google no longer answers for it), and the earliest token named is the key. Any token
    of a chain thus resolves to one key, whichever of them is seen first."""
    seen = [token]
    linked = purchase.get("linkedPurchaseToken")
    while isinstance(linked, str) and linked and linked not in seen and len(seen) <= MAX_CHAIN:
        key = held(linked)
        if key is not None:
            return key
        seen.append(linked)
        linked = linked_of(linked)
    return seen[-1]


def voided_effect(
    previous: StoreFact | None,
    *,
    app_id: str,
    workspace_id: str,
    store_key: str,
    product_type: int | None,
    voided_at: datetime,
    refund_type: int | None,
    order_id: str | None,
    received_at: datetime,
    current_token: str | None = None,
) -> Effect:
    """A voided purchase as the ledger's effect: the purchase revoked (`voided_fact`) and its
    `refund` event, identical whether a `voidedPurchaseNotification` or the sync's
    `voidedpurchases.list` reported it (the event id is the order's, so it lands once)."""
    fact = voided_fact(
        previous, store_key=store_key, product_type=product_type, voided_at=voided_at, refund_type=refund_type,
        current_token=current_token,
    )  # fmt: skip

    def events(user: str | None) -> list[CanonicalEvent]:
        return list(refund_events(fact, order_id, workspace_id=workspace_id, user_id=user, received_at=received_at))

    return Effect(app_id, fact, events)
