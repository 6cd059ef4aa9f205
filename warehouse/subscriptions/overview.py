"""`GET /v1/subscriptions/overview`: the stock figures live from the ledger, the 28-day flows from
the published report store.

The ledger holds each purchase's latest statement, so "how many pay now, and how much a month"
is one grouped query over the workspace's active purchases (`ix_entitlement_grants_active`
narrows it to them). Revenue and new customers need every transaction, which the ledger does
not keep: they are the published `subscription_metrics` days of the last 28 (as of the last
refresh, at most 6 hours old: `flows_as_of` says when)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

import duckdb
import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.subscriptions.answers import SubscriptionsOverview
from transforms.subscriptions.billing import nearest_standard_bounds
from transforms.subscriptions.overview import ACTIVE_GROUP_SCHEMA, Stocks, stocks
from transforms.timefmt import iso_z
from warehouse import fx
from warehouse.db import Database
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.paths import DataPaths
from warehouse.reports import serving
from warehouse.reports.report_lake import SUBSCRIPTION_METRICS
from warehouse.subscriptions.inputs import catalog_frame
from warehouse.workspaces import get_workspace

FLOW_DAYS = 28
PROMOTIONAL = "promotional"  # granted without a payment: never a paying subscription


def _day(conn: Connection, column: sa.ColumnElement[datetime]) -> sa.ColumnElement[object]:
    if conn.dialect.name == "postgresql":
        return sa.cast(column, sa.Date)
    return sa.func.date(column)


def _length_period(conn: Connection) -> sa.ColumnElement[str]:
    """For a purchase whose statement names no billing period: the standard period nearest its
    period's length (expiry - price time, in days to 3 decimals as the report rounds it), as
    thresholds (`nearest_standard_bounds`), so that the query returns a row per period, not one
    per subscription."""
    if conn.dialect.name == "postgresql":
        seconds = sa.func.extract("epoch", g.c.expires_at - g.c.priced_at)
        days = sa.func.round(sa.cast(seconds / 86400, sa.Numeric), 3)
    else:
        days = sa.func.round(sa.func.julianday(g.c.expires_at) - sa.func.julianday(g.c.priced_at), 3)
    bounds = nearest_standard_bounds()
    bucket = sa.case(*((days <= bound, period.iso) for bound, period in bounds[:-1]), else_=bounds[-1][1].iso)
    return sa.case((g.c.billing_period.is_(None) & g.c.priced_at.is_not(None), bucket), else_=None)


def active_groups(conn: Connection, workspace_id: str, now: datetime) -> pl.DataFrame:
    """The workspace's subscriptions granting access at `now` (production, paid by a store or a
    provider), grouped by what decides their MRR."""
    day = _day(conn, g.c.priced_at).label("priced_day")
    length = _length_period(conn).label("length_period")
    keys = [g.c.in_trial, g.c.price_amount, g.c.price_currency, day, g.c.billing_period, g.c.product_id, length]
    rows = conn.execute(
        sa.select(*keys, sa.func.count().label("subscriptions"))
        .where(
            g.c.workspace_id == workspace_id,
            g.c.kind == "subscription",
            g.c.access_ends_at > now,
            g.c.environment == "production",
            g.c.source != PROMOTIONAL,
            sa.or_(g.c.revoked_at.is_(None), g.c.revoked_at > now),
        )
        .group_by(*keys)
    ).all()
    records = [
        {
            "workspace_id": workspace_id,
            "in_trial": bool(r.in_trial),
            "price_amount": r.price_amount,
            "price_currency": r.price_currency,
            "priced_day": r.priced_day if isinstance(r.priced_day, date | None) else date.fromisoformat(r.priced_day),
            "billing_period": r.billing_period,
            "product_id": r.product_id,
            "length_period": r.length_period,
            "subscriptions": r.subscriptions,
        }
        for r in rows
    ]
    return pl.DataFrame(records, schema=ACTIVE_GROUP_SCHEMA)


def live_stocks(
    conn: Connection, workspace_id: str, now: datetime, *, catalog: pl.DataFrame, rates: pl.DataFrame, reporting: str
) -> Stocks:
    reporting_frame = pl.DataFrame([{"workspace_id": workspace_id, "reporting_currency": reporting}])
    return stocks(active_groups(conn, workspace_id, now), catalog=catalog, rates=rates, reporting=reporting_frame)


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
        live = live_stocks(conn, workspace_id, now, catalog=catalog, rates=rates, reporting=currency)
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
