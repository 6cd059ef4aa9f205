"""`sync_stats`: what arrived through an integration (docs/spec-decisions.md says what counts).

- Event kinds count the canonical events landed with the integration's type as `source`: for
  the attribution providers that includes the vendor's ingest callbacks to the workspace; the
  store kinds count the store's events (`EVENT_SOURCE`), from receipts, notifications and syncs
  alike, which share their ids and so land once. They
  are read where the events are: the lake's `canonical_events` (projected to four columns and
  filtered by workspace and source, so Parquet statistics skip most of it) and the landed rows
  not yet in the lake.
- Spend kinds add the spend rows the integration holds now (one per day, campaign, creative and
  country; a restated day is counted once), from the per-day counts the sync target keeps.
- The warehouse export counts rows exported, over its successful syncs.

`events_last_24h` counts by arrival (`received_at`, a sync's end for rows), `earliest_event_at`
is the earliest event's `occurred_at` (the earliest spend day, the earliest exported row).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.integrations.kinds import kind_of
from warehouse.events.tables import landed_events
from warehouse.integrations.repository import Integration
from warehouse.integrations.tables import integration_syncs, integrations
from warehouse.integrations.target import SPEND_ROWS
from warehouse.lake import Lake
from warehouse.reports.report_lake import CANONICAL_EVENTS, scan_days

DAY = timedelta(hours=24)


@dataclass(frozen=True)
class SyncStats:
    events_total: int
    events_last_24h: int
    earliest_event_at: datetime | None


def sync_stats(conn: Connection, lake: Lake, integration: Integration, now: datetime) -> SyncStats:
    produces = kind_of(integration.type).produces
    if produces == "exports":
        return _exported(conn, integration.id, now)
    total, recent, earliest = _events(conn, lake, integration, now)
    if produces == "spend":
        state = conn.execute(sa.select(integrations.c.sync_state).where(integrations.c.id == integration.id)).scalar()
        held: dict[str, int] = dict((state or {}).get(SPEND_ROWS, {}))
        total += sum(held.values())
        recent += _rows_written_since(conn, integration.id, now - DAY)
        if held:
            first = date.fromisoformat(min(held))
            first_at = datetime(first.year, first.month, first.day, tzinfo=UTC)
            earliest = first_at if earliest is None else min(earliest, first_at)
    return SyncStats(events_total=total, events_last_24h=recent, earliest_event_at=earliest)


# The `source` of the events a kind's sync lands, where it is not the type itself.
EVENT_SOURCE = {"ios_store_connect": "ios_store"}


def _events(conn: Connection, lake: Lake, integration: Integration, now: datetime) -> tuple[int, int, datetime | None]:
    since = now - DAY
    source = EVENT_SOURCE.get(integration.type, integration.type)
    in_lake = (
        scan_days(lake, CANONICAL_EVENTS)
        .filter((pl.col("workspace_id") == integration.workspace_id) & (pl.col("source") == source))
        .select(
            pl.len().alias("total"),
            (pl.col("received_at") >= since).sum().alias("recent"),
            pl.col("occurred_at").min().alias("earliest"),
        )
        .collect()
        .row(0, named=True)
    )
    pending = conn.execute(
        sa.select(
            sa.func.count(),
            sa.func.count().filter(landed_events.c.received_at >= since),
            sa.func.min(landed_events.c.occurred_at),
        ).where(
            landed_events.c.in_lake.is_(False),
            landed_events.c.workspace_id == integration.workspace_id,
            landed_events.c.source == source,
        )
    ).one()
    earliest = [e for e in (in_lake["earliest"], pending[2]) if e is not None]
    return (
        int(in_lake["total"]) + int(pending[0]),
        int(in_lake["recent"] or 0) + int(pending[1]),
        min(_utc(e) for e in earliest) if earliest else None,
    )


def _rows_written_since(conn: Connection, integration_id: str, since: datetime) -> int:
    return int(
        conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(integration_syncs.c.records_written), 0)).where(
                integration_syncs.c.integration_id == integration_id,
                integration_syncs.c.status == "succeeded",
                integration_syncs.c.finished_at >= since,
            )
        ).scalar_one()
    )


def _exported(conn: Connection, integration_id: str, now: datetime) -> SyncStats:
    succeeded = sa.and_(integration_syncs.c.integration_id == integration_id, integration_syncs.c.status == "succeeded")
    total, earliest = conn.execute(
        sa.select(
            sa.func.coalesce(sa.func.sum(integration_syncs.c.records_written), 0),
            sa.func.min(integration_syncs.c.earliest_record_at),
        ).where(succeeded)
    ).one()
    return SyncStats(
        events_total=int(total),
        events_last_24h=_rows_written_since(conn, integration_id, now - DAY),
        earliest_event_at=_utc(earliest) if earliest is not None else None,
    )


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
