"""Asset `canonical_events`: one Parquet file per UTC day, rebuilt from every landed row of it."""

from datetime import date

import dagster as dg
import polars as pl
from dagster import AssetExecutionContext  # no __future__ annotations here: Dagster inspects the real type

from orchestration.metadata import INGEST_TEAM, LAKE_KINDS, asset_tags, frame_metadata
from orchestration.partitions import daily_partitions, run_days
from orchestration.resources import DatabaseResource, DataDirResource
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.lake_events import duplicate_event_ids, null_occurred_at, partition_events
from warehouse.db import Database
from warehouse.events.landing import day_frame, mark_in_lake, pending_days
from warehouse.events.partitions import in_lake_count
from warehouse.events.views import CANONICAL_EVENTS_DATASET
from warehouse.lake import Lake

ASSET = dg.AssetKey(CANONICAL_EVENTS_DATASET)  # an asset is named after the lake dataset it writes
UNIQUE_EVENT_ID = "unique_event_id"
OCCURRED_AT_NOT_NULL = "occurred_at_not_null"
# Rewrites of one day when a concurrent run of the same day overtook this one (normally 1).
MAX_ATTEMPTS = 3


def _checks(duplicates: int, nulls: int) -> list[dg.AssetCheckResult]:
    return [
        dg.AssetCheckResult(
            check_name=UNIQUE_EVENT_ID,
            passed=duplicates == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"duplicate_rows": duplicates},
        ),
        dg.AssetCheckResult(
            check_name=OCCURRED_AT_NOT_NULL,
            passed=nulls == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"null_rows": nulls},
        ),
    ]


def _needs_write(db: Database, store: Lake, day: date, pending: set[date]) -> bool:
    """A day is rewritten when it has pending rows, or has landed rows but no file (a lost
    lake); otherwise its file already holds every row of it and is left untouched, so a range
    run over scattered late days rewrites only those days."""
    if day in pending:
        return True
    if day in store.days(CANONICAL_EVENTS_DATASET):
        return False
    with db.read() as conn:
        return in_lake_count(conn, day) > 0


def _write_day(context: AssetExecutionContext, db: Database, store: Lake, day: date) -> tuple[pl.DataFrame, int]:
    """Only the rows this run read are marked as in the lake; rows landing meanwhile stay pending
    for the next run. If another run of the same day marked rows this run did not read (it
    finished first, then this run overwrote its file with an older snapshot), the day is read
    and written again."""
    for _attempt in range(MAX_ATTEMPTS):
        with db.read() as conn:
            landed, pending_seqs = day_frame(conn, day)
        frame = partition_events(landed.lazy()).collect()
        store.write_day(CANONICAL_EVENTS_DATASET, day, frame)
        with db.write() as conn:
            mark_in_lake(conn, pending_seqs)
            overtaken = in_lake_count(conn, day) > landed.height
        if not overtaken:
            break
        context.log.warning(f"another run wrote {day} meanwhile; rewriting the day")
    return frame, len(pending_seqs)


@dg.asset(
    partitions_def=daily_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="events",
    kinds=LAKE_KINDS,
    owners=[INGEST_TEAM],
    tags=asset_tags("events", "raw"),
    description="Every accepted event, deduplicated, one Parquet file per UTC day of occurred_at.",
    check_specs=[
        dg.AssetCheckSpec(
            UNIQUE_EVENT_ID, asset=ASSET, blocking=True, description="event_id unique per workspace in the partition"
        ),
        dg.AssetCheckSpec(OCCURRED_AT_NOT_NULL, asset=ASSET, blocking=True, description="every event has a time"),
    ],
)
def canonical_events(
    context: AssetExecutionContext, database: DatabaseResource, data_dir: DataDirResource
) -> dg.MaterializeResult:
    """Idempotent: each day of the run's range that changed is re-read whole from
    `landed_events` and its file replaced atomically, so a rerun, or a late event re-running its
    day, gives the same file. One run covers a range of days (the sensor asks for every pending
    day at once), since starting a run costs seconds and a day's rewrite milliseconds."""
    db, store = database.database(), data_dir.paths.lake()
    with db.read() as conn:
        pending = set(pending_days(conn))
    rows = newly_landed = duplicates = nulls = 0
    written: list[str] = []
    last = pl.DataFrame(schema=CANONICAL_EVENT_SCHEMA)
    for day in run_days(context):
        if not _needs_write(db, store, day, pending):
            continue
        last, landed = _write_day(context, db, store, day)
        written.append(day.isoformat())
        rows += last.height
        newly_landed += landed
        duplicates += duplicate_event_ids(last)
        nulls += null_occurred_at(last)
    # One result for the run's range: row count and newly landed rows over the days written,
    # the preview from the last of them.
    metadata = frame_metadata(last, newly_landed=newly_landed, days_written=len(written))
    metadata["dagster/row_count"] = rows
    if written:
        metadata["last_day_written"] = written[-1]
        metadata["path"] = dg.MetadataValue.path(store.describe(CANONICAL_EVENTS_DATASET))
    return dg.MaterializeResult(metadata=metadata, check_results=_checks(duplicates, nulls))
