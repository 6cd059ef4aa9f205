"""Attribution callbacks normalized into canonical events: one pure function for every caller.

The ingest endpoint calls `normalize` per callback; a batch re-normalization (after a mapping
change, replaying raw callbacks) calls the same function, so both always agree. Mapping rules
of the spec ("Measurement ingest"):

1. The vendor's event token becomes a canonical type through the workspace mapping; unmapped
   tokens are dropped. Callbacks without an event token (installs, reattributions) are mapped
   by the key `activity_kind:<activity_kind>` (see `mapping_key`).
2. `created_at` (Unix seconds or ISO 8601) becomes `occurred_at`; missing or invalid: dropped.
3. `os_name` becomes `ios` / `android` (anything else: no platform); `country` is uppercased.
4. `revenue`, `currency`, `event_token`, `activity_kind` are kept in `properties`, and so is
   the attribution (`network`, `campaign`, `adgroup`, `creative`, from the `*_name` placeholders
   or `tracker_name`; see `attribution`).
5. Device identifiers (`adid`, `idfa`, `gps_adid`) and `user_id` are carried for identity joins.

Beyond the spec: events before the lake's first day or more than a day in the future are
dropped (no partition can hold them), and over-long values are discarded rather than truncated.
A country that is not an ISO 3166-1 code, a currency that is not ISO 4217 money or has no ECB
reference rate, and an amount that is not a finite number, is a negative charge or exceeds the
plausible bound of one event are dropped with their reason (`transforms.ingest.validation`):
summing them would put a wrong number in front of a user.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, get_args

from transforms.event_types import CANONICAL_EVENT_TYPES
from transforms.events import CanonicalEvent, DerivedId, canonical_event, lake_can_hold
from transforms.ingest.validation import MoneyProblem, money_problem, parse_amount, valid_country

# Identifier columns of `landed_events` are 200 characters; longer values are garbage.
MAX_IDENTIFIER = 200
# Mapping key prefix for callbacks that carry no event token (e.g. an install callback).
ACTIVITY_KIND_KEY = "activity_kind:"

_CallbackProblem = Literal[
    "unmapped_event", "missing_created_at", "invalid_created_at", "out_of_range", "unknown_country"
]
DropReason = _CallbackProblem | MoneyProblem
# Every reason a callback is dropped for, in the order they are checked.
DROP_REASONS: tuple[str, ...] = (*get_args(_CallbackProblem), *get_args(MoneyProblem))


@dataclass(frozen=True)
class Adapter:
    """A vendor's callback dialect: its name (the URL segment) and the parameters it sends."""

    vendor: str
    parameters: tuple[str, ...]
    # The parameter carrying the vendor's own unique id for a callback, when its template has one.
    stable_id_parameter: str | None = None
    # "callback": parameters in the query string or a form body (`normalize` here); "push": one
    # JSON object per POST (AppsFlyer's Push API, `transforms.ingest.attribution_provider_b`).
    delivery: Literal["callback", "push"] = "callback"


ATTRIBUTION_PROVIDER_A = Adapter(
    vendor="attribution_provider_a",
    parameters=(
        "secret",
        "app_token",
        "event_token",
        "activity_kind",
        "created_at",
        "os_name",
        "country",
        "adid",
        "idfa",
        "gps_adid",
        "revenue",
        "currency",
        "user_id",
        "network_name",
        "campaign_name",
        "adgroup_name",
        "creative_name",
        "tracker_name",
    ),
    # Optional: vendors can add a per-callback unique id placeholder to the callback URL.
    stable_id_parameter="event_id",
)

# AppsFlyer's Push API message fields FloKit reads (support article 207034356, Push API V2.0; the
# raw data field dictionary, article 208387843). The secret and the app token are query parameters.
ATTRIBUTION_PROVIDER_B = Adapter(
    vendor="attribution_provider_b",
    parameters=(
        "app_id",
        "event_name",
        "event_type",
        "event_time",
        "platform",
        "country_code",
        "appsflyer_id",
        "idfa",
        "advertising_id",
        "customer_user_id",
        "event_revenue",
        "event_revenue_currency",
        "media_source",
        "campaign",
        "af_adset",
        "af_ad",
    ),
    delivery="push",
)

ADAPTERS: Mapping[str, Adapter] = {a.vendor: a for a in (ATTRIBUTION_PROVIDER_A, ATTRIBUTION_PROVIDER_B)}


@dataclass(frozen=True)
class Dropped:
    reason: DropReason


def _value(params: Mapping[str, str], name: str) -> str | None:
    raw = params.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    return text or None


@dataclass(frozen=True)
class CheckedFields:
    occurred_at: datetime
    country: str | None
    amount: float | None
    currency: str | None


def check_fields(
    event_type: str,
    *,
    time: str | None,
    country_value: str | None,
    currency: str | None,
    revenue: object,  # a decimal string, or a JSON number; None when absent
    received_at: datetime,
    latest_rates: Mapping[str, float],
) -> CheckedFields | Dropped:
    """The checks every vendor's event passes, whatever its fields are called: a time the lake
    can hold, an ISO country, and money the reports can convert (`money_problem`)."""
    if time is None:
        return Dropped("missing_created_at")
    occurred_at = parse_created_at(time)
    if occurred_at is None:
        return Dropped("invalid_created_at")
    if not lake_can_hold(occurred_at, received_at):
        return Dropped("out_of_range")
    country_code = country(country_value)
    if country_value is not None and country_code is None:
        return Dropped("unknown_country")
    code = currency.upper() if currency else None
    amount = parse_amount(revenue) if revenue is not None else None
    if revenue is not None and amount is None:
        return Dropped("invalid_revenue")
    problem = money_problem(event_type, amount, code, latest_rates)
    if problem is not None:
        return Dropped(problem)
    return CheckedFields(occurred_at=occurred_at, country=country_code, amount=amount, currency=code)


def _identifier(params: Mapping[str, str], name: str) -> str | None:
    text = _value(params, name)
    return text if text is not None and len(text) <= MAX_IDENTIFIER else None


def mapping_key(params: Mapping[str, str]) -> str | None:
    """What the workspace mapping is looked up by: the event token, else the activity kind."""
    token = _value(params, "event_token")
    if token is not None:
        return token
    kind = _value(params, "activity_kind")
    return f"{ACTIVITY_KIND_KEY}{kind.lower()}" if kind is not None else None


_UNIX = re.compile(r"^\d{1,12}(\.\d+)?$")


def parse_created_at(raw: str | None) -> datetime | None:
    """Unix seconds (`1732147200`, `1732147200.5`) or ISO 8601 (naive means UTC); None if invalid."""
    if raw is None:
        return None
    try:
        if _UNIX.match(raw):
            return datetime.fromtimestamp(float(raw), UTC)
        parsed = datetime.fromisoformat(raw)
    except (ValueError, OverflowError, OSError):
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


_IOS = frozenset({"ios", "iphone os", "ipados", "iphone", "ipad"})


def platform(os_name: str | None) -> str | None:
    name = (os_name or "").strip().lower()
    if name in _IOS:
        return "ios"
    if name == "android":
        return "android"
    return None


_COUNTRY = re.compile(r"^[A-Za-z]{2}$")


def country(raw: str | None) -> str | None:
    """The ISO 3166-1 alpha-2 code (uppercased), or None for anything else (`ZZ`, `Germany`)."""
    if raw is None or not _COUNTRY.match(raw):
        return None
    code = raw.upper()
    return code if valid_country(code) else None


def stable_event_id(vendor: str, app_token: str, raw_id: str) -> str:
    """A vendor's own callback id, namespaced by vendor and app (ids are only unique there)."""
    digest = hashlib.sha256("\x1f".join((vendor, app_token, raw_id)).encode("utf-8")).hexdigest()
    return f"evt_{digest[:40]}"


# The vendor's attribution of a callback, as its spend report names the same things: the report's
# `campaign`, `adgroup` and `creative` dimensions are the callback's `{campaign_name}`,
# `{adgroup_name}` and `{creative_name}` placeholders, and `{tracker_name}` joins them as
# `network::campaign::adgroup::creative`. Kept under the report's names, so that the spend a sync
# brings meets the installs these callbacks bring (the reports group installs by `campaign` and
# `creative`).
ATTRIBUTION_LEVELS = ("network", "campaign", "adgroup", "creative")
TRACKER_SEPARATOR = "::"


def attribution(params: Mapping[str, str]) -> dict[str, str]:
    """The attribution levels a callback names; each from its own placeholder, else from its part
    of `tracker_name`. Absent levels are left out (no campaign: the reports count it organic)."""
    tracker = _value(params, "tracker_name")
    parts = tracker.split(TRACKER_SEPARATOR) if tracker else []
    found = {}
    for i, level in enumerate(ATTRIBUTION_LEVELS):
        value = _value(params, f"{level}_name") or (parts[i].strip() if i < len(parts) else None)
        if value and len(value) <= MAX_IDENTIFIER:
            found[level] = value
    return found


def normalize(
    params: Mapping[str, str],
    *,
    adapter: Adapter,
    workspace_id: str,
    mapping: Mapping[str, str],
    received_at: datetime,
    latest_rates: Mapping[str, float],
) -> CanonicalEvent | Dropped:
    """One callback's parameters to one canonical event, or the reason it is dropped.

    `mapping` is the workspace's vendor-token -> canonical-type mapping (the endpoint passes the
    one entry it looked up; a batch passes the whole mapping). `latest_rates` is the latest ECB
    reference rate per currency (`warehouse.fx.latest_rates`), for the currency and amount rules.
    """
    key = mapping_key(params)
    event_type = mapping.get(key) if key is not None else None
    if event_type is None or event_type not in CANONICAL_EVENT_TYPES:
        return Dropped("unmapped_event")
    checked = check_fields(
        event_type,
        time=_value(params, "created_at"),
        country_value=_value(params, "country"),
        currency=_value(params, "currency"),
        revenue=_value(params, "revenue"),
        received_at=received_at,
        latest_rates=latest_rates,
    )
    if isinstance(checked, Dropped):
        return checked

    app_token = _value(params, "app_token") or ""
    identity = {name: _identifier(params, name) for name in ("user_id", "adid", "idfa", "gps_adid")}
    event_token = _value(params, "event_token")
    activity_kind = _value(params, "activity_kind")
    raw_id = _identifier(params, adapter.stable_id_parameter) if adapter.stable_id_parameter else None
    event_id: str | DerivedId
    if raw_id is not None:
        event_id = stable_event_id(adapter.vendor, app_token, raw_id)
    else:
        # Every identity field, so two devices of one anonymous campaign never collide.
        user = "\x1e".join(v or "" for v in identity.values())
        event_id = DerivedId(app=app_token, user=user, raw=event_token or activity_kind)
    return canonical_event(
        event_id=event_id,
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=checked.occurred_at,
        source=adapter.vendor,
        received_at=received_at,
        platform=platform(_value(params, "os_name")),
        country=checked.country,
        properties={
            "revenue": checked.amount,
            "currency": checked.currency,
            "event_token": event_token,
            "activity_kind": activity_kind,
            **attribution(params),
        },
        **identity,
    )
