"""The live subscription stock: counts kept by the ledger's writes, swept by the overview.

`recount` runs in the transaction that applies a statement to a grant (the grant's row is
locked there): it takes the grant out of the count it was in and adds it to its new one, if it
counts now (`transforms.subscriptions.stock`). Time also ends access, with no write: `sweep`
finds the counted grants whose `stock_ends_at` has passed (an indexed range, a handful since the
last request) and takes each out once (the conditional UPDATE is the claim: two sweepers, or a
sweep racing a statement, cannot both take a grant out). `rebuild` recounts a workspace whole
(migration 0210, tests)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Row

from transforms.subscriptions.stock import StockEntry, counted_until, stock_entry
from warehouse.db import Database
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.entitlements.tables import subscription_stock as s


def _entry(row: Any) -> StockEntry | None:
    return stock_entry(
        source=row.source,
        kind=row.kind,
        environment=row.environment,
        in_trial=row.in_trial,
        price_amount=row.price_amount,
        price_currency=row.price_currency,
        priced_at=row.priced_at,
        billing_period=row.billing_period,
        product_id=row.product_id,
        expires_at=row.expires_at,
    )


def _add(conn: Connection, workspace_id: str, entry: StockEntry, delta: int) -> None:
    if delta < 0:
        conn.execute(
            sa.update(s)
            .where(s.c.workspace_id == workspace_id, s.c.stock_key == entry.key)
            .values(subscriptions=s.c.subscriptions + delta)
        )
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    insert = dialect.insert(s).values(
        workspace_id=workspace_id,
        stock_key=entry.key,
        in_trial=entry.in_trial,
        price_amount=entry.price_amount,
        price_currency=entry.price_currency,
        priced_day=entry.priced_day,
        period=entry.period,
        product_id=entry.product_id,
        subscriptions=delta,
    )
    conn.execute(
        insert.on_conflict_do_update(
            index_elements=["workspace_id", "stock_key"], set_={"subscriptions": s.c.subscriptions + delta}
        )
    )


def _take_out(conn: Connection, workspace_id: str, key: str) -> None:
    conn.execute(
        sa.update(s)
        .where(s.c.workspace_id == workspace_id, s.c.stock_key == key)
        .values(subscriptions=s.c.subscriptions - 1)
    )


def recount(conn: Connection, grant_id: str, now: datetime) -> None:
    """Bring the grant's count to its current state (its row is locked by the caller)."""
    row = conn.execute(sa.select(g).where(g.c.id == grant_id)).one()
    entry = _entry(row)
    until = counted_until(row.access_ends_at, row.revoked_at)
    counts = entry is not None and until is not None and until > now
    key = entry.key if counts and entry is not None else None
    if key == row.stock_key and (until if key else None) == row.stock_ends_at:
        return
    if row.stock_key is not None:
        _take_out(conn, row.workspace_id, row.stock_key)
    if counts and entry is not None:
        _add(conn, row.workspace_id, entry, 1)
    conn.execute(sa.update(g).where(g.c.id == grant_id).values(stock_key=key, stock_ends_at=until if key else None))


def sweep(db: Database, workspace_id: str, now: datetime) -> int:
    """Take the counted grants whose access has ended out of the stock. Returns how many."""
    with db.read() as conn:
        ended = conn.execute(
            sa.select(g.c.id, g.c.stock_key).where(g.c.workspace_id == workspace_id, g.c.stock_ends_at <= now)
        ).all()
    if not ended:
        return 0
    taken = 0
    with db.write() as conn:
        for grant_id, key in ended:
            claimed = conn.execute(
                sa.update(g)
                .where(g.c.id == grant_id, g.c.stock_key == key, g.c.stock_ends_at <= now)
                .values(stock_key=None, stock_ends_at=None)
            )
            if claimed.rowcount == 1:
                _take_out(conn, workspace_id, key)
                taken += 1
    return taken


def rebuild(conn: Connection, now: datetime, workspace_id: str | None = None) -> None:
    """Recount every grant (of one workspace, or all) from nothing."""
    where = [g.c.workspace_id == workspace_id] if workspace_id else []
    conn.execute(sa.delete(s).where(*([s.c.workspace_id == workspace_id] if workspace_id else [])))
    conn.execute(sa.update(g).where(*where).values(stock_key=None, stock_ends_at=None))
    for (grant_id,) in conn.execute(sa.select(g.c.id).where(*where)).all():
        recount(conn, grant_id, now)


STOCK_COLUMNS = (
    "stock_key", "in_trial", "price_amount", "price_currency", "priced_day", "period", "product_id", "subscriptions"
)  # fmt: skip
IN_CHUNK = 500  # keys per `IN (...)`: under SQLite's and PostgreSQL's parameter limits


def stock_counts(conn: Connection, workspace_id: str) -> Sequence[Row[str, bool, int]]:
    """The workspace's counts above zero: (stock_key, in_trial, subscriptions)."""
    return conn.execute(
        sa.select(s.c.stock_key, s.c.in_trial, s.c.subscriptions).where(
            s.c.workspace_id == workspace_id, s.c.subscriptions > 0
        )
    ).all()


def stock_rows(conn: Connection, workspace_id: str, keys: Sequence[str] | None = None) -> Sequence[Row[Any]]:
    """The workspace's counts above zero (or those of `keys`), in `STOCK_COLUMNS`' order."""
    select = sa.select(*(s.c[name] for name in STOCK_COLUMNS)).where(s.c.workspace_id == workspace_id)
    if keys is None:
        return conn.execute(select.where(s.c.subscriptions > 0)).all()
    rows: list[Row[Any]] = []
    for i in range(0, len(keys), IN_CHUNK):
        rows.extend(conn.execute(select.where(s.c.stock_key.in_(keys[i : i + IN_CHUNK]))).all())
    return rows
