"""RevenueCat Scheduled Data Export files (the Transactions feed) as RevenueCat delivers them.

Columns and their order from RevenueCat's "Transaction Format" table (RevenueCat/docs bf39a9c,
`docs/integrations/scheduled-data-exports.mdx`, export version 5; versions 6 and 7 add columns at
the end); times `2023-01-01 08:27:06` (UTC), booleans `true`/`false` (version 4 on). Files are
gzip-compressed CSV by default, at `<base>/<date>/transactions_<timestamp>.csv.gz`.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import polars as pl

COLUMNS = (
    "rc_original_app_user_id", "rc_last_seen_app_user_id_alias", "country", "country_source",
    "product_identifier", "product_display_name", "product_duration", "start_time", "end_time",
    "grace_period_end_time", "effective_end_time", "store", "is_auto_renewable", "is_trial_period",
    "is_in_intro_offer_period", "is_sandbox", "price_in_usd", "purchase_price_in_usd",
    "takehome_percentage", "tax_percentage", "commission_percentage", "store_transaction_id",
    "original_store_transaction_id", "refunded_at", "unsubscribe_detected_at",
    "billing_issues_detected_at", "purchased_currency", "price_in_purchased_currency",
    "purchase_price_in_purchased_currency", "entitlement_identifiers", "renewal_number",
    "is_trial_conversion", "presented_offering", "ownership_type", "reserved_subscriber_attributes",
    "custom_subscriber_attributes", "platform", "experiment_id", "experiment_variant", "updated_at",
    "offer", "offer_type", "first_seen_time", "auto_resume_time",
)  # fmt: skip


def rc_time(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if moment is not None else ""


def row(
    user: str,
    txn: str,
    start: datetime,
    end: datetime | None,
    *,
    original: str | None = None,
    renewal_number: int = 1,
    price: float = 9.99,
    trial: bool = False,
    conversion: bool = False,
    store: str = "app_store",
    renewable: bool = True,
    refunded_at: datetime | None = None,
    price_after_refunds: float | None = None,
    unsubscribed_at: datetime | None = None,
    sandbox: bool = False,
    country: str = "US",
    product: str = "com.example.monthly",
) -> dict[str, str]:
    """One Transactions row (every column present, empty where RevenueCat leaves it null)."""
    gross = 0.0 if trial else price
    left = price_after_refunds if price_after_refunds is not None else (0.0 if refunded_at else gross)

    def flag(value: bool) -> str:
        return "true" if value else "false"

    values: dict[str, str] = {
        "rc_original_app_user_id": "$RCAnonymousID:" + hashlib.sha256(user.encode()).hexdigest()[:32],
        "rc_last_seen_app_user_id_alias": user,
        "country": country,
        "country_source": "from_sdk",
        "product_identifier": product,
        "product_duration": "P1M" if renewable else "",
        "start_time": rc_time(start),
        "end_time": rc_time(end),
        "effective_end_time": rc_time(end),
        "store": store,
        "is_auto_renewable": flag(renewable),
        "is_trial_period": flag(trial),
        "is_in_intro_offer_period": "false",
        "is_sandbox": flag(sandbox),
        "price_in_usd": f"{left:.2f}",
        "purchase_price_in_usd": f"{gross:.2f}",
        "takehome_percentage": "0.85",
        "tax_percentage": "0.0",
        "commission_percentage": "0.15",
        "store_transaction_id": txn,
        "original_store_transaction_id": original or txn,
        "refunded_at": rc_time(refunded_at),
        "unsubscribe_detected_at": rc_time(unsubscribed_at),
        "purchased_currency": "EUR",
        "price_in_purchased_currency": f"{left * 0.92:.2f}",
        "purchase_price_in_purchased_currency": f"{gross * 0.92:.2f}",
        "entitlement_identifiers": '["premium"]',
        "renewal_number": str(renewal_number),
        "is_trial_conversion": flag(conversion),
        "ownership_type": "PURCHASED",
        "reserved_subscriber_attributes": "{}",
        "custom_subscriber_attributes": "{}",
        "platform": "ios" if store == "app_store" else "android",
        "updated_at": rc_time(max(m for m in (start, refunded_at, unsubscribed_at) if m is not None)),
        "first_seen_time": rc_time(start),
    }
    return {c: values.get(c, "") for c in COLUMNS}


def csv_bytes(rows: Iterable[Mapping[str, Any]], *, compress: bool = True) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow(r)
    data = out.getvalue().encode("utf-8")
    return gzip.compress(data, mtime=0) if compress else data


def parquet_bytes(rows: Iterable[Mapping[str, str]]) -> bytes:
    """The rows as RevenueCat's Parquet delivery types them: times as timestamps, flags as
    booleans, prices and renewal numbers as numbers."""
    typed: list[dict[str, Any]] = []
    for r in rows:
        t: dict[str, Any] = {}
        for c in COLUMNS:
            v = r.get(c, "")
            if c.endswith(("_time", "_at")):
                t[c] = datetime.strptime(v, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC) if v else None
            elif c.startswith("is_"):
                t[c] = v == "true"
            elif c.startswith(("price", "purchase_price")) or c.endswith("percentage"):
                t[c] = float(v) if v else None
            elif c == "renewal_number":
                t[c] = int(v)
            else:
                t[c] = v or None
        typed.append(t)
    buffer = io.BytesIO()
    pl.DataFrame(typed).write_parquet(buffer)
    return buffer.getvalue()


def key(prefix: str, delivered: datetime, ext: str = "csv.gz") -> str:
    """`<base>/<date>/transactions_<timestamp>.<ext>`."""
    base = prefix.strip("/")
    name = f"{delivered:%Y-%m-%d}/transactions_{delivered:%Y%m%dT%H%M%S}.{ext}"
    return f"{base}/{name}" if base else name
