"""The live stock the ledger keeps (`warehouse.subscriptions.stock`), on both databases: what a
statement adds and moves, what time takes out (the overview's sweep), and that the kept counts
always equal a recount from nothing, also when sweepers race."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa

from tests.support import run_together
from tests.support.entitlements import fact, statement
from tests.support.money import LATEST, RATES, reporting
from transforms.subscriptions.overview import stocks
from transforms.subscriptions.periods import CATALOG_SCHEMA
from warehouse.db import Database
from warehouse.entitlements.tables import entitlement_grants, subscription_stock
from warehouse.subscriptions import overview, stock


def counts(db: Database, workspace_id: str) -> dict[tuple[Any, ...], int]:
    with db.read() as conn:
        return {
            (bool(r.in_trial), r.price_amount, r.price_currency, r.period, r.product_id): r.subscriptions
            for r in stock.stock_rows(conn, workspace_id)
        }


def rebuilt(db: Database, workspace_id: str, now: datetime) -> dict[tuple[Any, ...], int]:
    with db.write() as conn:
        stock.rebuild(conn, now, workspace_id)
    return counts(db, workspace_id)


@pytest.mark.both_backends(reason="the counts are upserts and conditional updates written per dialect")
def test_statements_move_a_purchase_between_counts_and_time_takes_it_out(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    now = datetime.now(UTC)
    paid = dict(price_amount=9.99, price_currency="EUR", priced_at=now - timedelta(days=1), billing_period="P1M")
    statement(db, workspace, fact("k1", now=now, **paid))
    statement(db, workspace, fact("k2", now=now, in_trial=True, expires_at=now + timedelta(seconds=2)))
    statement(db, workspace, fact("k3", now=now, environment="sandbox", **paid))  # sandbox: never counted
    statement(db, workspace, fact("k4", now=now, kind="lifetime", expires_at=None, **paid))  # not a subscription
    assert counts(db, ws) == {
        (False, 9.99, "EUR", "P1M", "pro_monthly"): 1,
        (True, None, None, None, "pro_monthly"): 1,
    }
    # A renewal at a new price moves it; a refund (revocation) takes it out.
    statement(db, workspace, fact("k1", now=now, stated_at=now, **{**paid, "price_amount": 12.99}))
    assert counts(db, ws)[(False, 12.99, "EUR", "P1M", "pro_monthly")] == 1
    assert (False, 9.99, "EUR", "P1M", "pro_monthly") not in counts(db, ws)
    statement(db, workspace, fact("k5", now=now, **paid))
    statement(db, workspace, fact("k5", now=now, stated_at=now, revoked_at=now - timedelta(seconds=1), **paid))
    assert sum(counts(db, ws).values()) == 2
    # The trial's access ends with no statement: the sweep takes it out, once.
    later = now + timedelta(seconds=3)
    assert stock.sweep(db, ws, later) == 1 and stock.sweep(db, ws, later) == 0
    assert counts(db, ws) == {(False, 12.99, "EUR", "P1M", "pro_monthly"): 1}
    assert counts(db, ws) == rebuilt(db, ws, later)


@pytest.mark.both_backends(reason="racing sweepers claim each grant once through a conditional UPDATE")
def test_racing_sweeps_take_each_ended_grant_out_once(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    now = datetime.now(UTC)
    for i in range(20):
        ends = now + timedelta(seconds=1) if i % 2 else now + timedelta(days=20)
        statement(db, workspace, fact(f"r{i}", now=now, expires_at=ends, price_amount=4.99, price_currency="USD",
                                      priced_at=now, billing_period="P1W"))  # fmt: skip
    later = now + timedelta(seconds=2)
    taken = run_together(*[lambda: stock.sweep(db, ws, later) for _ in range(4)])
    assert sum(t for t in taken if isinstance(t, int)) == 10, taken
    assert sum(counts(db, ws).values()) == 10 == sum(rebuilt(db, ws, later).values())
    with db.read() as conn:
        counted = conn.execute(
            sa.select(sa.func.count()).where(entitlement_grants.c.stock_key.is_not(None))
        ).scalar_one()
        rows = conn.execute(sa.select(sa.func.count()).select_from(subscription_stock)).scalar_one()
    assert counted == 10 and rows >= 1


def test_the_values_a_process_keeps_follow_new_prices_the_catalog_the_currency_and_the_rates(
    db: Database, workspace: dict
) -> None:
    """`live_stocks` converts only keys it has not valued; after every change that moves a value
    its MRR still equals a conversion of every kept count from nothing (`stocks`)."""
    ws = workspace["workspace_id"]
    now = datetime.now(UTC)
    day = datetime.combine(RATES["rate_date"].max(), datetime.min.time(), tzinfo=UTC)
    price = dict(price_amount=10.0, price_currency="USD", priced_at=day, billing_period="P1M")
    statement(db, workspace, fact("v1", now=now, **price))
    statement(db, workspace, fact("v2", now=now, in_trial=True))
    no_catalog = pl.DataFrame(schema=CATALOG_SCHEMA)

    def live(catalog: pl.DataFrame = no_catalog, rates: pl.DataFrame = RATES, currency: str = "USD") -> float:
        figures = overview.live_stocks(db, ws, now, catalog=catalog, rates=rates, reporting=currency)
        with db.read() as conn:
            groups = overview.stock_groups(stock.stock_rows(conn, ws), ws)
        fresh = stocks(groups, catalog=catalog, rates=rates, reporting=reporting(ws, currency=currency))
        assert figures == fresh and (figures.active_subscriptions, figures.active_trials) == (1, 1)
        return figures.mrr

    assert live() == 10.0
    yearly = pl.DataFrame([{"workspace_id": ws, "product_id": "pro_monthly", "billing_period": "P1Y"}])
    assert live(yearly) == pytest.approx(10 / 12, abs=1e-6)  # the catalog's period wins
    assert live() == 10.0
    euros = live(currency="EUR")
    assert euros == pytest.approx(10.0 * LATEST["EUR"] / LATEST["USD"], abs=1e-6)
    dearer = RATES.with_columns(pl.when(pl.col("currency") == "USD").then(pl.col("per_eur") * 2).otherwise("per_eur"))
    assert live(rates=dearer, currency="EUR") == pytest.approx(euros / 2, abs=1e-6)  # a new rates file
    statement(db, workspace, fact("v1", now=now, stated_at=now, **{**price, "price_amount": 12.0}))
    assert live() == 12.0  # a renewal at a new price: a key not valued yet
