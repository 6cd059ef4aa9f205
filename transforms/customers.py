"""A customer as support sees them (issue 34, "Customers"): pure, no I/O.

What the ledger and the events say about one user, turned into the values the customer page
shows: a purchase's `status`, a transaction's `type`, the store's public name, the timeline's
entries and its page, a promotional grant's end, and what a search query matched. The reads are
`warehouse.customers`'; the decisions are here, so they are tested without a database and
documented once (docs/spec-decisions.md, "Customers (issue 34, preview)").
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import polars as pl

from transforms import event_types as t
from transforms.entitlements.facts import GENERIC_SUBSCRIPTION, PAYMENT_PROCESSOR, PROMOTIONAL

# The store names the API shows: the sources' own, except the generic path's (`generic`).
STORE_NAMES: Mapping[str, str] = {GENERIC_SUBSCRIPTION: "generic"}

PurchaseStatus = Literal["active", "in_trial", "in_grace", "cancelled", "expired", "refunded"]
TransactionType = Literal["purchase", "renewal", "refund"]
TimelineKind = Literal["event", "notification", "statement", "action"]
MatchedOn = Literal["user_id", "purchase_id", "stripe_customer_id", "stripe_subscription_id", "provider_customer_id"]

# The events that are a payment (or its reversal), and what each is as a transaction. A trial's
# start moves no money; a trial's conversion is the first paid period: a purchase.
TRANSACTION_TYPES: Mapping[str, TransactionType] = {
    t.SUBSCRIPTION_START: "purchase",
    t.PURCHASE: "purchase",
    t.TRIAL_CONVERTED: "purchase",
    t.RENEWAL: "renewal",
    t.REFUND: "refund",
}
# The event properties that name the purchase an event is about (its `store_key`): `purchase_key`,
# which every purchase source's events carry (docs/notifications.md); before it, the stores' and
# providers' original transaction id, the generic format's `purchase_id`, Stripe's subscription.
PURCHASE_KEY_PROPERTIES = ("purchase_key", "original_transaction_id", "purchase_id", "subscription_id")
ATTRIBUTION_EVENTS = (t.INSTALL, t.REATTRIBUTION)

TIMELINE_LIMIT_DEFAULT = 50  # one screen of a support agent's page
TIMELINE_LIMIT_MAX = 200  # a page stays one quick response; older entries via timeline_before
QUERY_MAX = 512  # the longest id searched: entitlement_grants.store_key's width

# A date-only ISO 8601 duration, at least one part: P1M, P7D, P1Y, P2W, P1Y6M.
_DURATION = re.compile(r"^P(?:(\d{1,4})Y)?(?:(\d{1,4})M)?(?:(\d{1,4})W)?(?:(\d{1,5})D)?$")
# The longest promotional grant: a typo (P100Y) should not grant a century.
PROMOTION_MAX = timedelta(days=3660)


class CustomerInputError(ValueError):
    """A request value the customer endpoints refuse; the message names the field."""


def store_name(source: str) -> str:
    return STORE_NAMES.get(source, source)


def add_duration(start: datetime, text: str) -> datetime:
    """`start` plus a date-only ISO 8601 duration; months and years are calendar ones (31 Jan +
    P1M is the last day of February), weeks and days exact."""
    match = _DURATION.match(text)
    if match is None or text == "P":
        raise CustomerInputError(
            f"duration must be an ISO 8601 duration of whole years, months, weeks or days such as P1M, P7D or P1Y; "
            f"got {text[:40]!r}"
        )
    years, months, weeks, days = (int(g or 0) for g in match.groups())
    if not (years or months or weeks or days):
        raise CustomerInputError("duration must be longer than nothing")
    total = start.month - 1 + months + 12 * years
    year, month = start.year + total // 12, total % 12 + 1
    if year > 2099:
        raise CustomerInputError("duration must end before 2100")
    day = min(start.day, calendar.monthrange(year, month)[1])
    return start.replace(year=year, month=month, day=day) + timedelta(weeks=weeks, days=days)


def promotion_end(now: datetime, *, expires_at: datetime | None, duration: str | None) -> datetime:
    """When a promotional grant made at `now` ends: exactly one of `expires_at` (in the future)
    and `duration` (from now), at most `PROMOTION_MAX` away."""
    if (expires_at is None) == (duration is None):
        raise CustomerInputError("send exactly one of expires_at and duration")
    end = expires_at if expires_at is not None else add_duration(now, duration or "")
    field = "expires_at" if expires_at is not None else "duration"
    if end <= now:
        raise CustomerInputError(f"{field} must be in the future")
    if end - now > PROMOTION_MAX:
        raise CustomerInputError(f"{field} must end within {PROMOTION_MAX.days} days")
    return end


@dataclass(frozen=True)
class GrantState:
    """What a purchase's status is decided from (an `entitlement_grants` row's columns)."""

    source: str
    kind: str
    expires_at: datetime | None
    grace_ends_at: datetime | None
    access_ends_at: datetime | None
    revoked_at: datetime | None
    in_trial: bool
    auto_renew: bool | None


def is_active(g: GrantState, now: datetime) -> bool:
    """The ledger's verdict (`ledger.current`): no consumable, not revoked, access not ended."""
    if g.kind == "consumable":
        return False
    if g.revoked_at is not None and g.revoked_at <= now:
        return False
    return g.access_ends_at is None or g.access_ends_at > now


def purchase_status(g: GrantState, now: datetime) -> PurchaseStatus:
    """One of the issue's statuses, first match wins: `refunded` (revoked by its store; a
    promotional grant ended early is `expired`), `expired` (access ended, a consumable once
    recorded), `in_grace` (past its expiry, within a grace period), `in_trial`, `cancelled`
    (auto-renew off, not yet expired), else `active`."""
    if g.revoked_at is not None and g.revoked_at <= now:
        return "expired" if g.source == PROMOTIONAL else "refunded"
    if not is_active(g, now):
        return "expired"
    if g.expires_at is not None and g.expires_at <= now:
        return "in_grace"
    if g.in_trial:
        return "in_trial"
    if g.kind == "subscription" and g.auto_renew is False and g.source != PROMOTIONAL:
        return "cancelled"
    return "active"


def purchase_key(properties: Mapping[str, Any]) -> str | None:
    """The purchase an event is about, as its grant's `store_key`, if the event names it."""
    for name in PURCHASE_KEY_PROPERTIES:
        value = properties.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def transaction_type(event_type: str) -> TransactionType | None:
    return TRANSACTION_TYPES.get(event_type)


def to_reporting(amount: float, per_eur_from: float | None, per_eur_to: float | None) -> float | None:
    """An amount in its currency to the reporting currency through the euro (the ECB's rates are
    units per EUR); None when either rate is unknown."""
    if per_eur_from is None or per_eur_to is None:
        return None
    return round(amount / per_eur_from * per_eur_to, 6)


@dataclass(frozen=True)
class Entry:
    occurred_at: datetime
    kind: TimelineKind
    summary: str
    source: str
    ref: str


def event_summary(event_type: str, properties: Mapping[str, Any]) -> str:
    """One line: the event, its product and its money when it has them."""
    parts = [event_type.replace("_", " ")]
    product = properties.get("product_id")
    if product:
        parts.append(f"of {product}")
    paywall = properties.get("paywall_id")
    if paywall:
        parts.append(f"on paywall {paywall}")
    revenue, currency = properties.get("revenue"), properties.get("currency")
    if isinstance(revenue, int | float) and currency:
        parts.append(f"({revenue:g} {currency})")
    return " ".join(parts)


def notification_summary(provider: str, status: str, error: str | None) -> str:
    text = f"{store_name(provider)} notification {status}"
    return f"{text}: {error[:200]}" if error else text


def statement_summary(product_id: str | None, status: PurchaseStatus, source: str) -> str:
    return f"{store_name(source)} states {product_id or 'a purchase'}: {status}"


ACTION_SUMMARIES: Mapping[str, str] = {
    "customer.entitlement_granted": "promotional access to {product_id} granted until {expires_at}",
    "customer.entitlement_ended": "promotional access to {product_id} ended",
}


def action_summary(action: str, actor: str, detail: Mapping[str, Any]) -> str:
    template = ACTION_SUMMARIES.get(action)
    text = template.format_map(_Blank(detail)) if template else action
    reason = detail.get("reason")
    return f"{text} by {actor}" + (f": {reason}" if reason else "")


class _Blank(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def timeline_page(entries: Iterable[Entry], *, before: datetime | None, limit: int) -> list[Entry]:
    """Newest first, strictly before `before` when given, at most `limit`. Entries at one moment
    keep a fixed order (kind, then ref), so pages do not shuffle between reads."""
    kept = [e for e in entries if before is None or e.occurred_at < before]
    kept.sort(key=lambda e: (e.occurred_at, e.kind, e.ref), reverse=True)
    return kept[:limit]


def first_exposures(impressions: Sequence[tuple[datetime, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Each (paywall, variant, version) the user saw, with the first time, earliest first."""
    first: dict[tuple[Any, Any, Any], datetime] = {}
    for at, p in impressions:
        key = (p.get("paywall_id"), p.get("variant_id"), p.get("version"))
        if key[0] is None:
            continue
        if key not in first or at < first[key]:
            first[key] = at
    return [
        {"paywall_id": k[0], "variant_id": k[1], "version": k[2], "first_seen_at": at}
        for k, at in sorted(first.items(), key=lambda item: item[1])
    ]


def attribution(installs: Sequence[tuple[datetime, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """The latest install or reattribution's network, campaign, adgroup and creative; None when
    the user has none."""
    if not installs:
        return None
    at, p = max(installs, key=lambda item: item[0])
    return {
        "network": p.get("network"),
        "campaign": p.get("campaign"),
        "adgroup": p.get("adgroup"),
        "creative": p.get("creative"),
        "installed_at": at,
    }


def matched_on(column: str, source: str) -> MatchedOn:
    """What a search hit on a grant's column is, as the API names it: a payment processor's
    purchase key is a Stripe subscription id and its customer id a Stripe customer id; a
    subscription provider's customer id is the provider's; every other key or token a purchase id."""
    if column == "user_id":
        return "user_id"
    if column == "customer_id":
        return "stripe_customer_id" if source == PAYMENT_PROCESSOR else "provider_customer_id"
    if source == PAYMENT_PROCESSOR and column == "store_key":
        return "stripe_subscription_id"
    return "purchase_id"


def check_query(query: str) -> str:
    value = query.strip()
    if not value:
        raise CustomerInputError("query must not be empty")
    if len(value) > QUERY_MAX:
        raise CustomerInputError(f"query must be at most {QUERY_MAX} characters")
    return value


def per_eur_on(rates: pl.DataFrame, currency: str, day: Any) -> float | None:
    """The ECB rate of `currency` (units per EUR) on `day`, or on the last day before it with a
    rate (weekends, holidays); None when the ECB has none. `rates`: a `rates_frame`."""
    known = rates.filter((pl.col("currency") == currency) & (pl.col("rate_date") <= day))
    found = known.select(pl.col("per_eur").last())
    value = found.item() if found.height else None
    return None if value is None else float(value)


def build_customer(
    *,
    user_id: str,
    app_id: str,
    grants: Sequence[Any],
    events: Sequence[Any],
    notifications: Sequence[Any],
    actions: Sequence[Any],
    reporting_currency: str,
    rates: pl.DataFrame,
    now: datetime,
    timeline_before: datetime | None,
    timeline_limit: int,
) -> dict[str, Any] | None:
    """The customer page's values (datetimes left as datetimes for the caller to format), or None
    when FloKit has never heard of the user: no grant, event, notification or action about them.
    `grants`: ledger rows (attributes as `entitlement_grants`' columns); `events`: canonical events
    (`event_id`, `event_type`, `occurred_at`, `platform`, `country`, `source`, `properties`);
    `notifications`: (`id`, `provider`, `status`, `error`, `received_at`); `actions`: audit rows."""
    if not (grants or events or notifications or actions):
        return None
    states = {gr.id: _state(gr) for gr in grants}
    by_key: dict[str, list[Any]] = {}
    for e in events:
        key = purchase_key(e.properties)
        if key is not None and transaction_type(e.event_type) is not None:
            by_key.setdefault(key, []).append(e)
    reporting_rate: dict[Any, float | None] = {}

    def in_reporting(amount: float, currency: str, at: datetime) -> float | None:
        day = at.date()
        if day not in reporting_rate:
            reporting_rate[day] = per_eur_on(rates, reporting_currency, day)
        return to_reporting(amount, per_eur_on(rates, currency, day), reporting_rate[day])

    def transactions(grant: Any) -> list[dict[str, Any]]:
        out = []
        for e in by_key.get(grant.store_key, []):
            revenue, currency = e.properties.get("revenue"), e.properties.get("currency")
            money = isinstance(revenue, int | float) and isinstance(currency, str)
            out.append({
                "id": e.event_id,
                "type": transaction_type(e.event_type),
                "occurred_at": e.occurred_at,
                "revenue": float(revenue) if money else None,
                "currency": currency if money else None,
                "revenue_in_reporting_currency": in_reporting(revenue, currency, e.occurred_at) if money else None,
            })  # fmt: skip
        return out

    entitlements = [
        {
            "product_id": gr.product_id,
            "active": is_active(states[gr.id], now),
            "source": gr.channel,
            "store": store_name(gr.source),
            "environment": gr.environment,
            "expires_at": gr.expires_at,
            "grace_ends_at": gr.grace_ends_at,
            "will_renew": bool(gr.auto_renew) and gr.kind == "subscription" and is_active(states[gr.id], now),
            "grant_id": gr.id,
        }
        for gr in grants
    ]
    purchases = [
        {
            "purchase_id": gr.store_key,
            "store": store_name(gr.source),
            "product_id": gr.product_id,
            "kind": gr.kind,
            "status": purchase_status(states[gr.id], now),
            "started_at": gr.created_at,
            "expires_at": gr.expires_at,
            "in_trial": bool(gr.in_trial),
            "transactions": transactions(gr),
        }
        for gr in grants
        if gr.source != PROMOTIONAL
    ]
    entries = [Entry(e.occurred_at, "event", event_summary(e.event_type, e.properties), e.source, e.event_id)
               for e in events]  # fmt: skip
    entries += [Entry(x.received_at, "notification", notification_summary(x.provider, x.status, x.error),
                      x.provider, x.id) for x in notifications]  # fmt: skip
    entries += [Entry(gr.stated_at, "statement", statement_summary(gr.product_id, purchase_status(states[gr.id], now),
                      gr.source), store_name(gr.source), gr.id) for gr in grants]  # fmt: skip
    entries += [Entry(a.created_at, "action", action_summary(a.action, a.actor, a.detail or {}), "flokit", str(a.id))
                for a in actions]  # fmt: skip
    seen = [e.occurred_at for e in events] + [gr.created_at for gr in grants] + [gr.stated_at for gr in grants]
    seen += [x.received_at for x in notifications]
    latest = max(events, key=lambda e: e.occurred_at) if events else None
    return {
        "user_id": user_id,
        "app_id": app_id,
        "first_seen_at": min(seen) if seen else None,
        "last_seen_at": max(seen) if seen else None,
        "country": next((e.country for e in reversed(events) if e.country), None) if latest else None,
        "platform": next((e.platform for e in reversed(events) if e.platform), None) if latest else None,
        "attribution": attribution(
            [(e.occurred_at, e.properties) for e in events if e.event_type in ATTRIBUTION_EVENTS]
        ),
        "entitlements": entitlements,
        "purchases": purchases,
        "paywall_exposures": first_exposures(
            [(e.occurred_at, e.properties) for e in events if e.event_type == t.PAYWALL_IMPRESSION]
        ),
        "timeline": [e.__dict__ for e in timeline_page(entries, before=timeline_before, limit=timeline_limit)],
    }


def _state(gr: Any) -> GrantState:
    return GrantState(
        source=gr.source,
        kind=gr.kind,
        expires_at=gr.expires_at,
        grace_ends_at=gr.grace_ends_at,
        access_ends_at=gr.access_ends_at,
        revoked_at=gr.revoked_at,
        in_trial=bool(gr.in_trial),
        auto_renew=gr.auto_renew,
    )
