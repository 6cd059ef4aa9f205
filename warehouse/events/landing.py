"""Landing accepted events: dedup claim and durable row in one transaction.

The caller passes the write transaction (`with db.write() as conn: land(conn, events)`), so a
failure anywhere before commit releases every claim it made: the vendor's retry is then
`written`, not `duplicate`. The one-event hot path may instead run on `single_event_connection`,
where on PostgreSQL the claim and the row are ONE statement and so atomic without a
transaction. Concurrent identical deliveries race on the claim's primary key; exactly one
wins (`INSERT ... ON CONFLICT DO NOTHING RETURNING` on both databases).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent
from warehouse.db import Database, utcnow
from warehouse.driver import driver_statement
from warehouse.events.tables import event_claims, landed_events

# Columns a landed row is inserted with (`seq` and `in_lake` take their defaults).
_LANDED_COLUMNS = (
    "event_id", "workspace_id", "event_type", "occurred_at", "day", "platform", "country",
    "user_id", "adid", "idfa", "gps_adid", "properties", "source", "received_at",
)  # fmt: skip
# Rows per statement when marking events as written to the lake (bind-parameter limits).
_CHUNK = 500


@dataclass(frozen=True)
class LandingResult:
    written: tuple[str, ...]
    duplicate: tuple[str, ...]


def _claim_statement(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    return (
        insert(event_claims)
        .on_conflict_do_nothing(index_elements=["workspace_id", "event_id"])
        .returning(event_claims.c.workspace_id, event_claims.c.event_id)
    )


# Built once per dialect and executed with parameters, so SQLAlchemy compiles each statement
# once per process (a `.values([...])` statement is recompiled on every call, which was the
# largest cost of an ingest callback: docs/benchmarks.md).
_CLAIM = {dialect: _claim_statement(dialect) for dialect in ("sqlite", "postgresql")}


def _claim_and_land_statement() -> Any:
    """PostgreSQL, one event: claim and landed row in ONE statement (a data-modifying CTE), one
    round trip instead of two. The row is inserted only if the claim was new."""
    claim = (
        postgresql.insert(event_claims)
        .values(
            workspace_id=sa.bindparam("workspace_id"),
            event_id=sa.bindparam("event_id"),
            claimed_at=sa.bindparam("claimed_at", type_=event_claims.c.claimed_at.type),
        )
        .on_conflict_do_nothing(index_elements=["workspace_id", "event_id"])
        .returning(event_claims.c.workspace_id, event_claims.c.event_id)
        .cte("claim")
    )
    columns = [c for c in landed_events.c if c.name not in ("seq", "in_lake", "workspace_id", "event_id")]
    return (
        landed_events.insert()
        .from_select(
            ["workspace_id", "event_id", *(c.name for c in columns)],
            sa.select(
                claim.c.workspace_id, claim.c.event_id, *(sa.bindparam(f"p_{c.name}", type_=c.type) for c in columns)
            ),
        )
        .returning(landed_events.c.event_id)
    )


def _landed_row_statement() -> Any:
    return landed_events.insert().values({name: sa.bindparam(name) for name in _LANDED_COLUMNS})


def _land_one(conn: Connection, event: CanonicalEvent) -> LandingResult:
    """The ingest hot path: one event. PostgreSQL: one statement (claim and row); SQLite: the
    claim, then the row only if the claim was new. Same semantics as the general path."""
    row = _row(event)
    now = utcnow()
    if conn.dialect.name == "postgresql":
        params = {f"p_{name}": value for name, value in row.items() if name not in ("workspace_id", "event_id")}
        params.update(workspace_id=event.workspace_id, event_id=event.event_id, claimed_at=now)
        landed = bool(driver_statement(conn, "claim_and_land", _claim_and_land_statement).execute(conn, params))
    else:
        claim = {"workspace_id": event.workspace_id, "event_id": event.event_id, "claimed_at": now}
        landed = bool(driver_statement(conn, "claim", lambda: _CLAIM["sqlite"]).execute(conn, claim))
        if landed:
            driver_statement(conn, "landed_row", _landed_row_statement).execute(conn, row)
    return LandingResult(written=(event.event_id,), duplicate=()) if landed else LandingResult((), (event.event_id,))


def single_event_connection(db: Database) -> AbstractContextManager[Connection]:
    """The connection to look up a callback's context and `land` its ONE event on.

    PostgreSQL: autocommit. Each statement is atomic alone (the landing is one data-modifying
    CTE), so a transaction would only add the BEGIN and COMMIT round trips: a callback costs two
    round trips instead of four. SQLite: a write transaction (the claim and the row are two
    statements there, and SQLite has no network round trips to save).
    """
    return db.driver_write() if db.is_sqlite else db.driver_autocommit()


def land(conn: Connection, events: Sequence[CanonicalEvent]) -> LandingResult:
    """Claim each event id and land the events whose claim is new. Duplicates within the batch
    count once as written and then as duplicates."""
    if not events:
        return LandingResult((), ())
    if len(events) == 1 and conn.dialect.name in ("postgresql", "sqlite"):
        return _land_one(conn, events[0])  # the ingest hot path: one callback, one event
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        raise ValueError("a batch lands in a transaction (db.write()), never on an autocommit connection")
    now = utcnow()
    claims = list({(e.workspace_id, e.event_id): e for e in events}.values())
    params = [{"workspace_id": e.workspace_id, "event_id": e.event_id, "claimed_at": now} for e in claims]
    claimed = set(
        tuple(row) for row in conn.execute(_CLAIM[conn.dialect.name], params[0] if len(params) == 1 else params)
    )
    fresh = [e for e in claims if (e.workspace_id, e.event_id) in claimed]
    if fresh:
        rows = [_row(e) for e in fresh]
        conn.execute(landed_events.insert(), rows[0] if len(rows) == 1 else rows)
    written = {(e.workspace_id, e.event_id) for e in fresh}
    return LandingResult(written=tuple(e.event_id for e in fresh), duplicate=_duplicates(events, written))


def _duplicates(events: Sequence[CanonicalEvent], written: set[tuple[str, str]]) -> tuple[str, ...]:
    """Every event that did not land: claimed earlier, or a repeat within this batch."""
    first: set[tuple[str, str]] = set()
    out = []
    for e in events:
        key = (e.workspace_id, e.event_id)
        if key in written and key not in first:
            first.add(key)
        else:
            out.append(e.event_id)
    return tuple(out)


def _row(e: CanonicalEvent) -> dict[str, Any]:
    return {
        "event_id": e.event_id,
        "workspace_id": e.workspace_id,
        "event_type": e.event_type,
        "occurred_at": e.occurred_at,
        "day": e.day.isoformat(),
        "platform": e.platform,
        "country": e.country,
        "user_id": e.user_id,
        "adid": e.adid,
        "idfa": e.idfa,
        "gps_adid": e.gps_adid,
        "properties": e.properties,
        "source": e.source,
        "received_at": e.received_at,
    }


def pending_days(conn: Connection) -> dict[date, int]:
    """Days with landed events not yet written to the lake, with the highest pending seq of each
    (a stable fingerprint of the pending state, usable in run keys)."""
    rows = conn.execute(
        sa.select(landed_events.c.day, sa.func.max(landed_events.c.seq))
        .where(landed_events.c.in_lake == sa.false())  # a range of ix_landed_events_lake_day
        .group_by(landed_events.c.day)
    ).all()
    return {date.fromisoformat(day): seq for day, seq in rows}


def day_frame(conn: Connection, day: date) -> tuple[pl.DataFrame, list[int]]:
    """Every landed event of a UTC day as a lake frame, and the seqs of those still pending."""
    rows = conn.execute(sa.select(landed_events).where(day_rows(day)).order_by(landed_events.c.seq)).all()
    frame = pl.DataFrame(
        {
            name: [
                json.dumps(r.properties, sort_keys=True, separators=(",", ":"))
                if name == "properties"
                else r._mapping[name]
                for r in rows
            ]
            for name in CANONICAL_EVENT_SCHEMA
        },
        schema=CANONICAL_EVENT_SCHEMA,
    )
    return frame, [r.seq for r in rows if not r.in_lake]


def mark_in_lake(conn: Connection, seqs: Sequence[int]) -> int:
    """Mark exactly the rows a partition run wrote (never "everything up to seq N": on
    PostgreSQL a lower seq can commit after a higher one)."""
    done = 0
    for i in range(0, len(seqs), _CHUNK):
        done += conn.execute(
            landed_events.update().where(landed_events.c.seq.in_(seqs[i : i + _CHUNK])).values(in_lake=True)
        ).rowcount
    return done


def day_rows(day: date) -> sa.ColumnElement[bool]:
    """Every landed row of a day, as two probes of the `(in_lake, day)` index (neither
    database skips a leading index column by itself)."""
    return sa.and_(landed_events.c.in_lake.in_([False, True]), landed_events.c.day == day.isoformat())


def prune_claims(conn: Connection, older_than: datetime) -> int:
    """Drop dedup claims past the window (spec: 30 days).

    PostgreSQL finds them through the BRIN index on `claimed_at`. SQLite has no index on it (one
    fewer b-tree written per callback) and walks the rowid instead: claims are appended in
    commit order with `claimed_at` taken inside the write transaction, so `claimed_at` grows
    with the rowid and the old claims are a prefix, found by binary search. The delete still
    checks `claimed_at`, so a clock step backwards can delay a prune, never cut a window short.
    """
    old = event_claims.c.claimed_at < older_than
    if conn.dialect.name != "sqlite":
        return conn.execute(event_claims.delete().where(old)).rowcount
    boundary = _last_rowid_claimed_before(conn, older_than)
    if boundary is None:
        return 0
    return conn.execute(event_claims.delete().where(sa.column("rowid") <= boundary, old)).rowcount


def _last_rowid_claimed_before(conn: Connection, moment: datetime) -> int | None:
    rowid: sa.ColumnClause[int] = sa.column("rowid")
    low, high = conn.execute(sa.select(sa.func.min(rowid), sa.func.max(rowid)).select_from(event_claims)).one()
    found: int | None = None
    while low is not None and low <= high:
        middle = (low + high) // 2
        row = conn.execute(
            sa.select(rowid, event_claims.c.claimed_at).where(rowid >= middle).order_by(rowid).limit(1)
        ).first()
        if row is None or row.claimed_at >= moment:
            high = middle - 1
        else:
            found, low = row.rowid, row.rowid + 1
    return found
