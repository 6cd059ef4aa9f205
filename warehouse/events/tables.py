"""Tables of the landing path: dedup claims and landed events.

`event_claims` is the 30-day dedup window (pruned daily). `landed_events` holds every accepted
event until the lake has it; `in_lake` marks the rows a `canonical_events` partition run has
written, so a sensor finds pending days with one indexed query. Claims and landed rows are
written in one transaction, so a failed write leaves neither (spec: "the dedup claim is released").

Every ingest callback inserts into these tables, and each index is one more b-tree written per
callback, a measurable share of the claim-and-land transaction (docs/benchmarks.md). So
each table has as few indexes as its readers need: `landed_events` one `(in_lake, day)` index
that serves both the pending-days query and a day's read, and `event_claims` none beyond its
key on SQLite, where the daily prune walks the rowid (claims are appended in time order,
`landing.prune_claims`), and a BRIN index on PostgreSQL, which costs an append almost nothing.
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import BigIntKey, IdString, metadata

event_claims = sa.Table(
    "event_claims",
    metadata,
    sa.Column("workspace_id", IdString, primary_key=True),
    sa.Column("event_id", sa.String(80), primary_key=True),
    sa.Column("claimed_at", UTCDateTime(), nullable=False),
)
sa.Index("ix_event_claims_claimed_at", event_claims.c.claimed_at, postgresql_using="brin").ddl_if(dialect="postgresql")

landed_events = sa.Table(
    "landed_events",
    metadata,
    sa.Column("seq", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("event_id", sa.String(80), nullable=False),
    sa.Column("workspace_id", IdString, nullable=False),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("occurred_at", UTCDateTime(), nullable=False),
    # UTC day of occurred_at as YYYY-MM-DD: the lake partition key, indexed for partition reads.
    sa.Column("day", sa.String(10), nullable=False),
    sa.Column("platform", sa.String(16)),
    sa.Column("country", sa.String(2)),
    sa.Column("user_id", sa.String(200)),
    sa.Column("adid", sa.String(200)),
    sa.Column("idfa", sa.String(200)),
    sa.Column("gps_adid", sa.String(200)),
    sa.Column("properties", sa.JSON, nullable=False),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("received_at", UTCDateTime(), nullable=False),
    sa.Column("in_lake", sa.Boolean, nullable=False, server_default=sa.false()),
    # Leading `in_lake`: pending days are one range; a day's rows are two probes (`day_rows`).
    sa.Index("ix_landed_events_lake_day", "in_lake", "day"),
)
