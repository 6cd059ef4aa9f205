"""Landing accepted events: dedup claim and durable row in one transaction.

The caller passes the write transaction (`with db.write() as conn: land(conn, events)`), so a
failure anywhere before commit releases every claim it made: the vendor's retry is then
`written`, not `duplicate`. Concurrent identical deliveries race on the claim's primary key;
exactly one wins (`INSERT ... ON CONFLICT DO NOTHING RETURNING` on both databases).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent
from warehouse.db import utcnow
from warehouse.events.tables import event_claims, landed_events

# Rows per statement when marking events as written to the lake (bind-parameter limits).
_CHUNK = 500


@dataclass(frozen=True)
class LandingResult:
    written: tuple[str, ...]
    duplicate: tuple[str, ...]


def _insert(conn: Connection) -> Any:
    return (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(event_claims)


def land(conn: Connection, events: Sequence[CanonicalEvent]) -> LandingResult:
    """Claim each event id and land the events whose claim is new. Duplicates within the batch
    count once as written and then as duplicates."""
    if not events:
        return LandingResult((), ())
    now = utcnow()
    claims = list({(e.workspace_id, e.event_id): e for e in events}.values())
    claimed = set(
        conn.execute(
            _insert(conn)
            .values([{"workspace_id": e.workspace_id, "event_id": e.event_id, "claimed_at": now} for e in claims])
            .on_conflict_do_nothing(index_elements=["workspace_id", "event_id"])
            .returning(event_claims.c.workspace_id, event_claims.c.event_id)
        ).all()
    )
    fresh = [e for e in claims if (e.workspace_id, e.event_id) in claimed]
    if fresh:
        conn.execute(landed_events.insert(), [_row(e) for e in fresh])
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
        .where(landed_events.c.in_lake.is_(sa.false()))
        .group_by(landed_events.c.day)
    ).all()
    return {date.fromisoformat(day): seq for day, seq in rows}


def day_frame(conn: Connection, day: date) -> tuple[pl.DataFrame, list[int]]:
    """Every landed event of a UTC day as a lake frame, and the seqs of those still pending."""
    rows = conn.execute(
        sa.select(landed_events).where(landed_events.c.day == day.isoformat()).order_by(landed_events.c.seq)
    ).all()
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


def prune_claims(conn: Connection, older_than: datetime) -> int:
    """Drop dedup claims past the window (spec: 30 days)."""
    return conn.execute(event_claims.delete().where(event_claims.c.claimed_at < older_than)).rowcount
