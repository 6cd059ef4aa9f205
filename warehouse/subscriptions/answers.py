"""Read the subscription report from the published report store (v1 and the dashboard alike)."""

from __future__ import annotations

from datetime import date, timedelta

import duckdb

from transforms.subscriptions import metrics
from transforms.subscriptions.answers import SubscriptionsMeta, SubscriptionsQuery, SubscriptionsReport
from transforms.timefmt import iso_z
from warehouse.db import Database
from warehouse.reports import serving
from warehouse.reports.report_lake import SUBSCRIPTION_METRICS, SUBSCRIPTION_MOVEMENTS
from warehouse.workspaces import get_workspace

_DAILY_SQL = f"SELECT * FROM {SUBSCRIPTION_METRICS} WHERE workspace_id = $ws AND date BETWEEN $first AND $last"  # noqa: S608
_PAIRED_SQL = f"SELECT * FROM {SUBSCRIPTION_MOVEMENTS} WHERE workspace_id = $ws AND date BETWEEN $first AND $last"  # noqa: S608


def subscriptions_answer(
    cur: duckdb.DuckDBPyConnection | None, db: Database, workspace_id: str, query: SubscriptionsQuery
) -> SubscriptionsReport:
    """The report from one snapshot of the store (`cur`; None before the first refresh: no rows).
    Days after the materialization's own day have no state yet and are left out."""
    with db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
    generated_at = serving.meta(cur).generated_at
    rows: list[dict[str, object]] = []
    if cur is not None and generated_at is not None:
        end = min(query.end_date, generated_at.date())
        if end >= query.start_date:
            first = query.start_date - timedelta(days=1) if query.start_date > date.min else date.min
            params = {"ws": workspace_id, "first": first, "last": end}
            daily = cur.sql(_DAILY_SQL, params=params).pl().cast(metrics.DAILY_SCHEMA)
            params["first"] = query.start_date
            paired = cur.sql(_PAIRED_SQL, params=params).pl().cast(metrics.PAIRED_SCHEMA)
            rows = metrics.report(
                daily, paired, start=query.start_date, end=end, interval=query.interval, group_by=query.group_by
            ).to_dicts()
    return SubscriptionsReport.model_validate(
        {
            "data": rows,
            "meta": SubscriptionsMeta(
                currency=currency, generated_at=iso_z(generated_at), interval=query.interval, group_by=query.group_by
            ),
        }
    )
