"""Writing a generated demo history through the same paths real data takes.

Events are landed with `warehouse.events.landing.land` in batches (dedup claim + landed row in
one transaction each), exactly like the ingest gateway does; the ingest pipeline then writes
them to `canonical_events`. Seeding twice with the same seed lands nothing new (same ids).
Spend is delivered as the ad-platform syncs deliver it: a `spend_raw` file per day.

`write_event_partitions` is the bulk path for the benchmark (millions of events): it writes the
`canonical_events` partitions directly, byte-identical to what landing and then
`landing.day_frame` + `Lake.write` produce for the same events (a test holds it to that), but
it replaces whole days, so it is only for a lake whose days hold nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

import polars as pl

from transforms.demo import DEFAULT_WORLD, DemoConfig, DemoData, DemoWorld, generate
from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent
from warehouse.db import Database
from warehouse.events.landing import land
from warehouse.lake import Lake
from warehouse.reports.report_lake import CANONICAL_EVENTS, write_spend_raw

# Events per landing transaction: big enough to amortize the commit, small enough that a
# SQLite writer holds the lock for milliseconds, not seconds, while the API keeps landing.
LANDING_BATCH = 1000


@dataclass(frozen=True)
class SeedResult:
    events: int
    written: int
    duplicate: int
    spend_rows: int
    first_day: date
    last_day: date
    data: DemoData  # what was generated: the planted truth's realized totals count it


def canonical_events(frame: pl.DataFrame) -> Iterator[CanonicalEvent]:
    for row in frame.iter_rows(named=True):
        yield CanonicalEvent(**{**row, "properties": json.loads(row["properties"])})


# Told how far seeding got, as it goes: (step, done, total). Steps: "generated" (events),
# "landing" (events landed so far, after each batch), "spend" (spend rows written).
SeedProgress = Callable[[str, int, int], None]


def _silent(_step: str, _done: int, _total: int) -> None:
    pass


def land_frame(
    db: Database, frame: pl.DataFrame, batch: int = LANDING_BATCH, progress: SeedProgress = _silent
) -> tuple[int, int]:
    """Land a canonical-event frame in batches; returns (written, duplicate)."""
    written = duplicate = 0
    for start in range(0, frame.height, batch):
        events = list(canonical_events(frame.slice(start, batch)))
        with db.write() as conn:
            result = land(conn, events)
        written += len(result.written)
        duplicate += len(result.duplicate)
        progress("landing", min(start + batch, frame.height), frame.height)
    return written, duplicate


def seed(
    db: Database, lake: Lake, config: DemoConfig, progress: SeedProgress = _silent, world: DemoWorld = DEFAULT_WORLD
) -> SeedResult:
    data = generate(config, world)
    progress("generated", data.events.height, data.events.height)
    written, duplicate = land_frame(db, data.events, progress=progress)
    write_spend_raw(lake, data.spend)
    progress("spend", data.spend.height, data.spend.height)
    days = data.events["occurred_at"].dt.date()
    return SeedResult(
        events=data.events.height,
        written=written,
        duplicate=duplicate,
        spend_rows=data.spend.height,
        first_day=days.min(),  # type: ignore[arg-type]
        last_day=days.max(),  # type: ignore[arg-type]
        data=data,
    )


def write_event_partitions(lake: Lake, events: pl.DataFrame) -> list[date]:
    """Bulk path (benchmark): one `canonical_events` partition per UTC day, replaced whole."""
    frame = events.select(list(CANONICAL_EVENT_SCHEMA)).with_columns(pl.col("occurred_at").dt.date().alias("_day"))
    parts = {day: part.drop("_day") for (day,), part in frame.group_by("_day", maintain_order=True)}
    lake.write_days(CANONICAL_EVENTS, parts)
    return sorted(parts)
