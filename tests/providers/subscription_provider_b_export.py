"""Adapty export files as its S3 integration writes them, generated for the tests.

Columns in the order of the events table in Adapty's docs ("Amazon S3", table structure:
`adaptyteam/adapty-docs` versioned_docs/version-3.0/s3-exports.md), and the paywall-visits table
of the same page. Times as Adapty's event examples print them (`2020-02-18T18:40:22.000000+0000`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

EVENT_COLUMNS = (
    "profile_id", "event_type", "event_datetime", "transaction_id", "original_transaction_id",
    "subscription_expires_at", "environment", "revenue_usd", "proceeds_usd", "net_revenue_usd",
    "tax_amount_usd", "revenue_local", "proceeds_local", "net_revenue_local", "tax_amount_local",
    "customer_user_id", "store", "product_id", "base_plan_id", "developer_id", "ab_test_name",
    "ab_test_revision", "paywall_name", "paywall_revision", "profile_country", "install_date", "idfv",
    "idfa", "advertising_id", "ip_address", "cancellation_reason", "android_app_set_id", "android_id",
    "device", "currency", "store_country", "attribution_source", "attribution_network_user_id",
    "attribution_status", "attribution_channel", "attribution_campaign", "attribution_ad_group",
    "attribution_ad_set", "attribution_creative",
)  # fmt: skip
PAYWALL_VISIT_COLUMNS = (
    "profile_id", "customer_user_id", "profile_country", "install_date", "store", "paywall_showed_at",
    "developer_id", "ab_test_name", "ab_test_revision", "paywall_name", "paywall_revision",
)  # fmt: skip


def adapty_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+0000")


def event_row(
    event_type: str,
    at: datetime,
    *,
    transaction_id: str,
    profile_id: str = "6f1c2a4e-0000-4000-8000-000000000001",
    customer_user_id: str | None = "user-1",
    revenue_usd: float | None = None,
    **columns: str,
) -> dict[str, str]:
    """One events-table row: a Production App Store event unless the columns say otherwise."""
    row = {
        "profile_id": profile_id,
        "event_type": event_type,
        "event_datetime": adapty_time(at),
        "transaction_id": transaction_id,
        "original_transaction_id": columns.pop("original_transaction_id", transaction_id),
        "environment": "Production",
        "customer_user_id": customer_user_id or "",
        "store": "app_store",
        "product_id": "com.example.premium.monthly",
        "profile_country": "US",
        "store_country": "USA",
        "currency": "USD",
    }
    if revenue_usd is not None:
        row["revenue_usd"] = f"{revenue_usd:.2f}"
        row["proceeds_usd"] = f"{revenue_usd * 0.7:.2f}"
        row.setdefault("revenue_local", f"{revenue_usd:.2f}")
    row.update(columns)
    return row


def export_csv(rows: Iterable[Mapping[str, str]], columns: Iterable[str] = EVENT_COLUMNS) -> bytes:
    """A CSV file with every column of the table, empty where a row has no value."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(dict(row))
    return out.getvalue().encode("utf-8")
