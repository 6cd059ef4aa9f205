"""`subscription_provider_a` (RevenueCat): REST API v2 records to canonical events, pure mapping, no I/O.

What the API states, and so what a sync can say (RevenueCat OpenAPI `openapi-spec/api-v2.yaml`,
RevenueCat/docs at bf39a9c, Feb 2026):

- A `subscription` object has `starts_at`, `current_period_starts_at` (ms since epoch),
  `status` (`trialing`, `active`, `expired`, ...), `auto_renewal_status` (`will_renew`,
  `will_not_renew`, ...), `total_revenue_in_usd` (a MonetaryAmount: `currency`, `gross`,
  `proceeds`, ...), `store`, `environment`, `country`, `product_id`. It carries no per-period
  price and no refund.
- `GET /subscriptions/{id}/transactions` (App Store and Play Store subscriptions only) lists each
  period's store transaction: `id`, `purchased_at`, `expiration_date`. No price, no trial flag.
- A `purchase` (one-time) has `purchased_at`, `revenue_in_usd`, `status` (`owned` | `refunded`),
  `store_purchase_identifier`; no refund date.

So the mapping reads the periods from the transactions (or, for the stores without that
endpoint, the two periods the subscription names: its start and its current period) and:

- the first period is a trial when the subscription is `trialing` now, when nothing was ever
  paid (`gross` 0 on a non-promotional subscription), or when the first period is clearly
  shorter than the next (a 3-, 7- or 14-day trial before a weekly or longer period): the API has
  no trial flag, and this is the evidence it gives. `trial_start` at the first period; the first
  paid period is then `trial_converted`, else `subscription_start`; later ones `renewal`;
- each paid period books an equal share of `total_revenue_in_usd.gross` (USD, as RevenueCat
  reports it; the shares add up to it to the cent): exact for a constant price, the average
  where the price changed or where a trial as long as the paid period was read as paid. For
  the stores without a transactions endpoint (Stripe, Web Billing, Amazon) only a
  subscription's first paid period is known to be its only one: later periods land without an
  amount (their invoices, or Scheduled Data Exports, are the exact source);
- `auto_renewal_status == will_not_renew` is a `cancellation` at the current period's start
  (the API says auto-renew is off, not when it was turned off; the period's start is a
  deterministic time, so a re-sync gives the same event);
- a one-time purchase is `purchase`, and `refund` too when its status is `refunded`, at the
  purchase time (the only time the API gives).

Event ids are `rc:<store transaction id>:<type>` (a webhook's `transaction_id` is the same store
id), `rc:<subscription id>:<period start ms>:<type>` for periods without a transaction, and
`rc:<first store transaction id>:cancellation` (`rc:<subscription id>:cancellation` without
transactions), the ids Scheduled Data Export rows map to as well
(`transforms.integrations.subscription_provider_a_exports`); the user is the customer id, which is the app user id the
app gives RevenueCat (`Purchases.logIn`), so events join the user's other events. Sandbox
records are never mapped (the connector asks for `environment=production`; this drops strays).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from transforms.event_types import (
    CANCELLATION,
    PURCHASE,
    REFUND,
    RENEWAL,
    SUBSCRIPTION_START,
    TRIAL_CONVERTED,
    TRIAL_START,
)
from transforms.events import CanonicalEvent, lake_can_hold
from transforms.ingest.validation import valid_country
from transforms.timefmt import iso_z

ID_PREFIX = "rc"
MAX_EVENT_ID = 80
# The stores whose subscriptions have `GET .../subscriptions/{id}/transactions` ("Get a Play
# Store or App Store subscription's transactions").
STORES_WITH_TRANSACTIONS = frozenset({"app_store", "play_store"})
_PLATFORMS = {"app_store": "ios", "mac_app_store": "ios", "play_store": "android"}
# A first period shorter than this share of the next one is a trial (7 days before a month is
# 0.23, 14 days before a month 0.47, 3 days before a week 0.43; a month before a month is 1).
TRIAL_RATIO = 0.75


@dataclass(frozen=True)
class Period:
    """One billing period of a subscription: its store transaction id (None when the store has no
    transactions endpoint) and when it was bought."""

    transaction_id: str | None
    starts_at: datetime
    ends_at: datetime | None


def moment(ms: object) -> datetime | None:
    """RevenueCat's times are integers, milliseconds since the epoch."""
    if isinstance(ms, bool) or not isinstance(ms, int | float):
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def event_id(raw: str, event_type: str) -> str:
    """`rc:<raw>:<type>`, or a hash of it when a store id makes it longer than the lake allows."""
    full = f"{ID_PREFIX}:{raw}:{event_type}"
    if len(full) <= MAX_EVENT_ID:
        return full
    digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:40]
    return f"{ID_PREFIX}:{digest}:{event_type}"


def periods(subscription: Mapping[str, Any], transactions: Sequence[Mapping[str, Any]] | None) -> list[Period]:
    """The subscription's periods, oldest first: its transactions when the store lists them, else
    the start and (when later) the current period."""
    if transactions:
        found = []
        for t in transactions:
            start = moment(t.get("purchased_at"))
            if start is not None and isinstance(t.get("id"), str) and t["id"]:
                found.append(Period(t["id"], start, moment(t.get("expiration_date"))))
        return sorted(found, key=lambda p: (p.starts_at, p.transaction_id or ""))
    first = moment(subscription.get("starts_at"))
    current = moment(subscription.get("current_period_starts_at"))
    out = []
    if first is not None:
        out.append(Period(None, first, None))
    if current is not None and (first is None or current > first):
        out.append(Period(None, current, moment(subscription.get("current_period_ends_at"))))
    return out


def _gross(amount: object) -> tuple[float, str] | None:
    if not isinstance(amount, Mapping):
        return None
    gross, currency = amount.get("gross"), amount.get("currency")
    if isinstance(gross, bool) or not isinstance(gross, int | float) or not isinstance(currency, str):
        return None
    return float(gross), currency.upper()


def split_cents(total: float, parts: int) -> list[float]:
    """`total` in `parts` equal shares to the cent, the odd cents on the first shares, so that
    the shares add up to the total exactly (RevenueCat's figure, whatever the split)."""
    cents = round(total * 100)
    base, extra = divmod(cents, parts)
    return [(base + (1 if i < extra else 0)) / 100 for i in range(parts)]


def _first_is_trial(subscription: Mapping[str, Any], found: Sequence[Period], gross: float) -> bool:
    if subscription.get("status") == "trialing":
        return True
    if gross == 0 and subscription.get("store") != "promotional":
        return True
    if len(found) >= 2:
        a, b = found[0], found[1]
        first = (a.ends_at or b.starts_at) - a.starts_at
        second = (b.ends_at - b.starts_at) if b.ends_at is not None else None
        if second is not None and second.total_seconds() > 0:
            return first.total_seconds() < TRIAL_RATIO * second.total_seconds()
    return False


@dataclass(frozen=True)
class Mapper:
    """Builds one workspace's events; `now` is the sync's time (events later than the lake accepts
    are left for a later sync)."""

    workspace_id: str
    source: str
    now: datetime

    def _event(
        self,
        raw_id: str,
        event_type: str,
        occurred_at: datetime,
        record: Mapping[str, Any],
        user_id: str,
        properties: dict[str, Any],
    ) -> CanonicalEvent | None:
        if not lake_can_hold(occurred_at, self.now):
            return None
        store = record.get("store")
        country = record.get("country")
        return CanonicalEvent(
            event_id=event_id(raw_id, event_type),
            workspace_id=self.workspace_id,
            event_type=event_type,
            occurred_at=occurred_at,
            source=self.source,
            received_at=self.now,
            platform=_PLATFORMS.get(store) if isinstance(store, str) else None,
            country=country if isinstance(country, str) and valid_country(country) else None,
            user_id=user_id,
            properties={k: v for k, v in properties.items() if v is not None},
        )

    def subscription(
        self, subscription: Mapping[str, Any], transactions: Sequence[Mapping[str, Any]] | None = None
    ) -> list[CanonicalEvent]:
        """Every event one subscription states (see the module docstring)."""
        sub_id, user = subscription.get("id"), subscription.get("customer_id")
        if not isinstance(sub_id, str) or not isinstance(user, str) or not sub_id or not user:
            return []
        if subscription.get("environment", "production") != "production":
            return []
        money = _gross(subscription.get("total_revenue_in_usd"))
        gross, currency = money if money is not None else (0.0, None)
        found = [p for p in periods(subscription, transactions) if p.starts_at <= self.now]
        if not found:
            return []
        product = subscription.get("product_id")
        # The purchase as the webhook's fact keys it (its original transaction id): the first
        # store transaction where the store lists them; unknown otherwise (left out).
        key = found[0].transaction_id if transactions else None
        base = {
            "product_id": product, "store": subscription.get("store"), "subscription_id": sub_id, "purchase_key": key,
        }  # fmt: skip

        def raw(period: Period) -> str:
            return period.transaction_id or f"{sub_id}:{int(period.starts_at.timestamp() * 1000)}"

        events: list[CanonicalEvent | None] = []
        trial = _first_is_trial(subscription, found, gross)
        paid = found[1:] if trial else found

        def period_end(period: Period) -> dict[str, Any]:
            return {"period_ends_at": iso_z(period.ends_at)}

        if trial:
            trial_props = base | period_end(found[0])
            events.append(self._event(raw(found[0]), TRIAL_START, found[0].starts_at, subscription, user, trial_props))
        promotional = subscription.get("store") == "promotional"
        # Without the store's transactions only the start and the current period are known, not
        # how many were paid between them: the gross is then split only when one period was paid.
        exact = bool(transactions) or len(paid) == 1
        shares = split_cents(gross, len(paid)) if paid and exact and not promotional else None
        for i, period in enumerate(paid):
            kind = RENEWAL if i else (TRIAL_CONVERTED if trial else SUBSCRIPTION_START)
            money_props = {"revenue": shares[i], "currency": currency} if shares is not None else {}
            props = base | money_props | period_end(period)
            events.append(self._event(raw(period), kind, period.starts_at, subscription, user, props))
        if subscription.get("auto_renewal_status") == "will_not_renew":
            at = moment(subscription.get("current_period_starts_at")) or found[-1].starts_at
            # Named by the subscription's first store transaction (its original transaction id)
            # where the store lists transactions: the key a Scheduled Data Export row gives too.
            first = found[0].transaction_id if transactions else None
            events.append(self._event(first or sub_id, CANCELLATION, at, subscription, user, base))
        return [e for e in events if e is not None]

    def purchase(self, purchase: Mapping[str, Any]) -> list[CanonicalEvent]:
        """A one-time purchase; and its refund when RevenueCat marks it refunded."""
        user = purchase.get("customer_id")
        raw = purchase.get("store_purchase_identifier") or purchase.get("id")
        at = moment(purchase.get("purchased_at"))
        if not isinstance(user, str) or not user or not isinstance(raw, str) or not raw or at is None:
            return []
        if purchase.get("environment", "production") != "production":
            return []
        money = _gross(purchase.get("revenue_in_usd"))
        props: dict[str, Any] = {
            "product_id": purchase.get("product_id"),
            "store": purchase.get("store"),
            "purchase_id": purchase.get("id"),
            "purchase_key": raw,  # the store's purchase id, the webhook's transaction id for it
        }
        if money is not None:
            props |= {"revenue": money[0], "currency": money[1]}
        events = [self._event(raw, PURCHASE, at, purchase, user, props)]
        if purchase.get("status") == "refunded":
            events.append(self._event(raw, REFUND, at, purchase, user, props))
        return [e for e in events if e is not None]

    def customer(
        self,
        subscriptions: Iterable[tuple[Mapping[str, Any], Sequence[Mapping[str, Any]] | None]],
        purchases: Iterable[Mapping[str, Any]],
    ) -> list[CanonicalEvent]:
        out: list[CanonicalEvent] = []
        for subscription, transactions in subscriptions:
            out.extend(self.subscription(subscription, transactions))
        for purchase in purchases:
            out.extend(self.purchase(purchase))
        return out
