"""`subscription_provider_b` (Adapty): the daily event export (CSV files in the customer's bucket) to events.

What the export is (Adapty docs, "Amazon S3" integration, `adaptyteam/adapty-docs`
`versioned_docs/version-3.0/s3-exports.md`, and the Google Cloud Storage twin page): Adapty writes
CSV files into a folder of the customer's bucket, one a day at 04:00 UTC with the events created
on the previous UTC day, plus files the customer exports by hand for a date range (which overlap
the daily ones). Events and paywall visits are two tables with different columns, possibly in the
same folder. Adapty warns that "this structure may grow over time": code must rely on the named
columns, not on the column list as a whole, so a file is read by header name and extra columns
are ignored. The file naming is not documented, so nothing here depends on it.

The events table's columns used here: `profile_id` (Adapty's user id), `customer_user_id` (the
app's own user id, empty when the app never set it), `event_type` (lower-cased event name),
`event_datetime` (ISO 8601), `transaction_id`, `original_transaction_id`, `environment`
(`Sandbox` or `Production`), `revenue_usd` ("can be empty"), `proceeds_usd`, `revenue_local`,
`currency` (ISO 4217 of the transaction), `store` (`app_store`, `play_store`, ...), `product_id`,
`profile_country` (Adapty, by IP; spelled `profile_county` in an older page), `store_country`,
`idfa`, `advertising_id`, `paywall_name`, `attribution_campaign`, `attribution_ad_group`,
`attribution_ad_set`, `attribution_creative`, and `subscription_expires_at` when a row has it
(the webhook's rows do, `transforms.purchases.subscription_provider_b.export_row`; the export's
column list does not document it). Every event names its purchase as `purchase_key` (the
original transaction id, else the transaction's: the ledger's `store_key`); a period's event
(trial, start, renewal, conversion) carries `subscription_expires_at` as `period_ends_at`.

Event names (Adapty docs, "Events", `versioned_docs/version-3.0/events.md`) and what they become:
`trial_started` -> trial_start, `trial_converted` -> trial_converted, `subscription_started`
(`subscription_initial_purchase` in the older property table) -> subscription_start,
`subscription_renewed` -> renewal ("from the second billing"), `subscription_refunded` ->
refund, `non_subscription_purchase` -> purchase, `non_subscription_purchase_refunded` -> refund,
`subscription_renewal_cancelled` and `trial_renewal_cancelled` (auto-renew turned off; their
earlier names `auto_renew_off_subscription` and `auto_renew_off`) -> cancellation. Not mapped,
and counted as `not_mapped`: the expiries (`subscription_expired`, `trial_expired`, and their
earlier names `subscription_cancelled`, `trial_cancelled`: access *ended*, which is not the
canonical "auto-renew turned off"), billing issues, grace periods, reactivations, pauses,
deferrals, `access_level_updated`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Literal

import pycountry

from transforms import event_types as t
from transforms.events import CanonicalEvent, canonical_event, lake_can_hold
from transforms.ingest.attribution import country as alpha2_country
from transforms.ingest.validation import CHARGE_TYPES, parse_amount
from transforms.timefmt import iso_z

SOURCE_PREFIX: Final = "adapty"
MAX_EVENT_ID: Final = 80

EVENT_TYPES: Final[Mapping[str, str]] = {
    "trial_started": t.TRIAL_START,
    "trial_converted": t.TRIAL_CONVERTED,
    "subscription_started": t.SUBSCRIPTION_START,
    "subscription_initial_purchase": t.SUBSCRIPTION_START,
    "subscription_renewed": t.RENEWAL,
    "subscription_refunded": t.REFUND,
    "non_subscription_purchase": t.PURCHASE,
    "non_subscription_purchase_refunded": t.REFUND,
    "subscription_renewal_cancelled": t.CANCELLATION,
    "trial_renewal_cancelled": t.CANCELLATION,
    "auto_renew_off_subscription": t.CANCELLATION,
    "auto_renew_off": t.CANCELLATION,
}
# Columns without which a file is not an events export at all.
REQUIRED_EVENT_COLUMNS: Final = ("profile_id", "event_type", "event_datetime")
# The paywall-visits table has no event type and a visit timestamp of its own.
PAYWALL_VISIT_COLUMN: Final = "paywall_showed_at"
PLATFORMS: Final[Mapping[str, str]] = {"app_store": "ios", "play_store": "android"}

FileKind = Literal["events", "paywall_visits"]
SkipReason = Literal[
    "not_mapped",
    "sandbox",
    "missing_user",
    "invalid_event_datetime",
    "out_of_range",
    "invalid_revenue",
    "negative_charge",
]


class ExportProblem(ValueError):
    """A file that cannot be read as an Adapty export (not UTF-8 CSV, rows that do not match the
    header, columns missing): the sync names the file and fails with `bad_response`."""


@dataclass(frozen=True)
class ExportFile:
    kind: FileKind
    rows: tuple[dict[str, str], ...]


@dataclass
class Mapped:
    """The events of one file, and how many rows were left out for each reason."""

    events: list[CanonicalEvent] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)


def read_export(data: bytes) -> ExportFile:
    """Parse one export file strictly: UTF-8 (a byte-order mark allowed), every row exactly as
    many fields as the header, so a file cut short or with a stray delimiter is refused rather
    than read into shifted columns. Empty fields are left out of a row's dict."""
    if not data.strip():
        return ExportFile("events", ())
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ExportProblem(f"not UTF-8 text (byte {exc.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = [name.strip() for name in next(reader)]
        kind = _kind(header)
        rows = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise ExportProblem(f"line {reader.line_num} has {len(row)} fields, the header has {len(header)}")
            rows.append({name: value for name, value in zip(header, row, strict=True) if value != ""})
    except csv.Error as exc:
        raise ExportProblem(f"not valid CSV at line {reader.line_num}: {exc}") from None
    return ExportFile(kind, tuple(rows))


def _kind(header: Sequence[str]) -> FileKind:
    names = set(header)
    if "event_type" not in names and PAYWALL_VISIT_COLUMN in names:
        return "paywall_visits"
    missing = [name for name in REQUIRED_EVENT_COLUMNS if name not in names]
    if missing:
        raise ExportProblem(f"not an Adapty events export: no {', '.join(missing)} column (header: {_cut(header)})")
    return "events"


def _cut(header: Sequence[str], limit: int = 12) -> str:
    shown = ", ".join(header[:limit])
    return shown + (f", … ({len(header)} columns)" if len(header) > limit else "")


def map_rows(rows: Iterable[Mapping[str, str]], *, workspace_id: str, source: str, received_at: datetime) -> Mapped:
    """Canonical events of an events file's rows (`read_export`), with the rows left out counted."""
    mapped = Mapped()
    for row in rows:
        result = map_row(row, workspace_id=workspace_id, source=source, received_at=received_at)
        if isinstance(result, CanonicalEvent):
            mapped.events.append(result)
        else:
            mapped.skipped[result] += 1
    return mapped


def map_row(
    row: Mapping[str, str], *, workspace_id: str, source: str, received_at: datetime
) -> CanonicalEvent | SkipReason:
    """One export row as a canonical event, or why it is left out.

    Revenue is `revenue_usd` in USD: the gross price, before the store's cut, as the reports book
    charges (docs/metrics.md, "Charges ... are gross revenue"). The local price is kept beside it
    for audit but not booked, because many storefront currencies have no ECB reference rate (the
    reports could not convert them, and an unconvertible amount stops the publish), while USD
    always has one. Sandbox purchases are tests, not revenue, and are left out.
    """
    vendor_type = (row.get("event_type") or "").strip().lower()
    event_type = EVENT_TYPES.get(vendor_type)
    if event_type is None:
        return "not_mapped"
    if (row.get("environment") or "").strip().lower() == "sandbox":
        return "sandbox"
    user_id = row.get("customer_user_id") or row.get("profile_id")
    if not user_id:
        return "missing_user"
    occurred_at = parse_datetime(row.get("event_datetime"))
    if occurred_at is None:
        return "invalid_event_datetime"
    if not lake_can_hold(occurred_at, received_at):
        return "out_of_range"

    money_event = event_type in CHARGE_TYPES or event_type in (t.REFUND, t.PURCHASE)
    revenue = parse_amount(row["revenue_usd"]) if money_event and "revenue_usd" in row else None
    if money_event and "revenue_usd" in row:
        if revenue is None or not math.isfinite(revenue):
            return "invalid_revenue"
        if revenue < 0 and event_type in CHARGE_TYPES:
            # As at ingest: the refund comes as its own event; booking a negative charge too
            # would count it twice.
            return "negative_charge"

    transaction = row.get("transaction_id")
    period_ends_at = None
    if event_type in (t.TRIAL_START, t.SUBSCRIPTION_START, t.RENEWAL, t.TRIAL_CONVERTED):
        period_ends_at = iso_z(parse_datetime(row.get("subscription_expires_at")))
    properties: dict[str, object] = {
        "revenue": revenue,
        "currency": "USD" if revenue is not None else None,
        "product_id": row.get("product_id"),
        "vendor_event": vendor_type,
        "transaction_id": transaction,
        "original_transaction_id": row.get("original_transaction_id"),
        # The purchase as the ledger keys it (`transforms.purchases.subscription_provider_b.fact`).
        "purchase_key": row.get("original_transaction_id") or transaction,
        "period_ends_at": period_ends_at,
        "store": row.get("store"),
        "proceeds_usd": _number(row.get("proceeds_usd")),
        "local_revenue": _number(row.get("revenue_local")),
        "local_currency": (row.get("currency") or "").upper() or None,
        "paywall_name": row.get("paywall_name"),
        "campaign": row.get("attribution_campaign"),
        "adgroup": row.get("attribution_ad_group") or row.get("attribution_ad_set"),
        "creative": row.get("attribution_creative"),
        "adapty_profile_id": row.get("profile_id"),
    }
    return canonical_event(
        event_id=event_id(
            transaction, event_type, profile=row.get("profile_id"), vendor_type=vendor_type, at=occurred_at
        ),
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=occurred_at,
        source=source,
        received_at=received_at,
        platform=PLATFORMS.get((row.get("store") or "").strip().lower()),
        country=country(row.get("profile_country") or row.get("profile_county")) or country(row.get("store_country")),
        user_id=user_id,
        idfa=row.get("idfa"),
        gps_adid=row.get("advertising_id"),
        properties={k: v for k, v in properties.items() if v is not None},
    )


def event_id(transaction: str | None, event_type: str, *, profile: str | None, vendor_type: str, at: datetime) -> str:
    """`adapty:<transaction_id>:<type>`: the same fact in a daily file and in a manual export
    that overlaps it gets the same id, so landing keeps one. A cancellation also carries its
    time: auto-renew can be turned off, on and off again within one paid period (one
    transaction), and each is a fact. A row without a transaction id (none documented, but the
    column "can be empty" like the others) is named by its profile, vendor type and time. An id
    that would exceed the 80-character limit uses a digest of the transaction id instead."""
    key = transaction or _digest(profile or "", vendor_type, at.isoformat())
    suffix = f":{int(at.timestamp())}" if event_type == t.CANCELLATION else ""
    candidate = f"{SOURCE_PREFIX}:{key}:{event_type}{suffix}"
    if len(candidate) <= MAX_EVENT_ID:
        return candidate
    return f"{SOURCE_PREFIX}:{_digest(key)}:{event_type}{suffix}"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:32]


def parse_datetime(raw: str | None) -> datetime | None:
    """ISO 8601 as Adapty writes it (`2020-02-18T18:40:22.000000+0000` in its examples; `Z`,
    `+00:00` and a space separator accepted too); a time without an offset is UTC."""
    if not raw:
        return None
    try:
        parsed = datetime.fromisoformat(raw.strip())
    except ValueError:
        return None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def country(raw: str | None) -> str | None:
    """An ISO 3166-1 alpha-2 code, from alpha-2 or alpha-3 (App Store storefronts are alpha-3)."""
    if not raw:
        return None
    value = raw.strip()
    if len(value) == 3 and value.isalpha():
        found = pycountry.countries.get(alpha_3=value.upper())
        return alpha2_country(found.alpha_2) if found is not None else None
    return alpha2_country(value)


def _number(raw: str | None) -> float | None:
    value = parse_amount(raw) if raw is not None else None
    return value if value is not None and math.isfinite(value) else None
