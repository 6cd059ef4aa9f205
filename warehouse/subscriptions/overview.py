"""`GET /v1/subscriptions/overview`: the stock figures live from the ledger, the 28-day flows from
the published report store.

"How many pay now, and how much a month" is read from the counts the ledger keeps as it writes
grants (`warehouse.subscriptions.stock`: a few thousand rows per workspace, not one per
subscription), after taking out the grants whose access ended since the last request. Revenue
and new customers need every transaction, which the ledger does not keep: they are the
published `subscription_metrics` days of the last 28 (as of the last refresh, at most 6 hours
old: `flows_as_of` says when)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

import duckdb
import polars as pl

from transforms.subscriptions.answers import SubscriptionsOverview
from transforms.subscriptions.overview import ACTIVE_GROUP_SCHEMA, Stocks, stocks
from transforms.timefmt import iso_z
from warehouse import fx
from warehouse.db import Database
from warehouse.paths import DataPaths
from warehouse.reports import serving
from warehouse.reports.report_lake import SUBSCRIPTION_METRICS
from warehouse.subscriptions import stock
from warehouse.subscriptions.inputs import catalog_frame
from warehouse.workspaces import get_workspace

FLOW_DAYS = 28
PROMOTIONAL = "promotional"  # granted without a payment: never a paying subscription


def active_groups(db: Database, workspace_id: str, now: datetime) -> pl.DataFrame:
    """The workspace's subscriptions granting access at `now`, as the ledger's kept counts
    (`warehouse.subscriptions.stock`), after taking out those whose access ended since."""
    stock.sweep(db, workspace_id, now)
    with db.read() as conn:
        rows = stock.stock_rows(conn, workspace_id)
    records = [
        {
            "workspace_id": workspace_id,
            "in_trial": bool(r.in_trial),
            "price_amount": r.price_amount,
            "price_currency": r.price_currency,
            "priced_day": date.fromisoformat(r.priced_day) if r.priced_day else None,
            "billing_period": r.period,
            "product_id": r.product_id,
            "subscriptions": r.subscriptions,
        }
        for r in rows
    ]
    return pl.DataFrame(records, schema=ACTIVE_GROUP_SCHEMA)


def live_stocks(
    db: Database, workspace_id: str, now: datetime, *, catalog: pl.DataFrame, rates: pl.DataFrame, reporting: str
) -> Stocks:
    reporting_frame = pl.DataFrame([{"workspace_id": workspace_id, "reporting_currency": reporting}])
    return stocks(active_groups(db, workspace_id, now), catalog=catalog, rates=rates, reporting=reporting_frame)


@dataclass(frozen=True)
class Flows:
    net_revenue: float
    new_customers: int
    as_of: datetime | None  # when the published figures were computed (None: never)


def published_flows(cur: duckdb.DuckDBPyConnection | None, workspace_id: str, today: date) -> Flows:
    """Net revenue and new customers of the 28 days ending `today`, as last published."""
    meta = serving.meta(cur)
    if cur is None or meta.generated_at is None:
        return Flows(0.0, 0, None)
    query = (
        f"SELECT coalesce(sum(net_revenue), 0), coalesce(sum(new_customers), 0) FROM {SUBSCRIPTION_METRICS} "  # noqa: S608
        "WHERE workspace_id = $ws AND date BETWEEN $first AND $last"
    )
    first = today - timedelta(days=FLOW_DAYS - 1)
    rows = cur.sql(query, params={"ws": workspace_id, "first": first, "last": today}).fetchall()
    revenue, customers = rows[0]
    return Flows(round(float(revenue), 6), int(customers), meta.generated_at)


def overview_answer(
    db: Database, cur: duckdb.DuckDBPyConnection | None, paths: DataPaths, workspace_id: str, now: datetime
) -> SubscriptionsOverview:
    """The overview as v1 answers it and the dashboard's cards show it (one computation)."""
    rates = fx.load_rates(paths)
    with db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
        catalog = catalog_frame(conn, workspace_id)
    live = live_stocks(db, workspace_id, now, catalog=catalog, rates=rates, reporting=currency)
    flows = published_flows(cur, workspace_id, now.date())
    mrr = round(live.mrr, 6)
    return SubscriptionsOverview(
        active_subscriptions=live.active_subscriptions,
        active_trials=live.active_trials,
        mrr=mrr,
        arr=round(mrr * 12, 6),
        revenue_last_28_days=flows.net_revenue,
        new_customers_last_28_days=flows.new_customers,
        as_of=iso_z(now) or "",
        currency=currency,
        flows_as_of=iso_z(flows.as_of),
    )
