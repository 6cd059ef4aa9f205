"""Where the report datasets live in the lake, and how they are read and written.

Daily datasets (`<lake>/<name>/date=YYYY-MM-DD/part.parquet`): the inputs `canonical_events`
(written by the ingest pipeline) and `spend_raw` (written by ad-platform syncs, or the demo
seed), and the derived `acquisitions`, `subscription_events`, `active_days`, `spend`,
`payback_daily`, `cohort_activity`. Whole-table datasets
(`<lake>/<name>/data.parquet`): `payback`, `cohort_curves`, `ltv`. Every write is the lake's
atomic replace, so a re-run of a day rewrites exactly that day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import (
    ACQUISITION_SCHEMA,
    ACTIVE_DAY_SCHEMA,
    CLEAN_SPEND_SCHEMA,
    COHORT_ACTIVITY_SCHEMA,
    COHORT_CURVE_SCHEMA,
    LTV_SCHEMA,
    PAYBACK_DAILY_SCHEMA,
    PAYBACK_SCHEMA,
    SPEND_SCHEMA,
    SUBSCRIPTION_EVENT_SCHEMA,
    WEEK_LOOKBACK_DAYS,
)
from warehouse.events.views import CANONICAL_EVENTS_DATASET
from warehouse.lake import Lake

CANONICAL_EVENTS = CANONICAL_EVENTS_DATASET  # the events domain names its dataset
SPEND_RAW = "spend_raw"
ACQUISITIONS = "acquisitions"
SUBSCRIPTION_EVENTS = "subscription_events"
ACTIVE_DAYS = "active_days"
SPEND = "spend"
PAYBACK_DAILY = "payback_daily"
COHORT_ACTIVITY = "cohort_activity"
PAYBACK = "payback"
COHORT_CURVES = "cohort_curves"
LTV = "ltv"

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    CANONICAL_EVENTS: CANONICAL_EVENT_SCHEMA,
    SPEND_RAW: SPEND_SCHEMA,
    ACQUISITIONS: ACQUISITION_SCHEMA,
    SUBSCRIPTION_EVENTS: SUBSCRIPTION_EVENT_SCHEMA,
    ACTIVE_DAYS: ACTIVE_DAY_SCHEMA,
    SPEND: CLEAN_SPEND_SCHEMA,
    PAYBACK_DAILY: PAYBACK_DAILY_SCHEMA,
    COHORT_ACTIVITY: COHORT_ACTIVITY_SCHEMA,
    PAYBACK: PAYBACK_SCHEMA,
    COHORT_CURVES: COHORT_CURVE_SCHEMA,
    LTV: LTV_SCHEMA,
}
# Each derived daily dataset, the raw inputs its day D is computed from, and how many days before
# D each input reaches (cohort activity of D looks back over D-6..D for the same week).
DERIVED_FROM: dict[str, tuple[tuple[str, int], ...]] = {
    ACQUISITIONS: ((CANONICAL_EVENTS, 0),),
    SUBSCRIPTION_EVENTS: ((CANONICAL_EVENTS, 0),),
    ACTIVE_DAYS: ((CANONICAL_EVENTS, 0),),
    SPEND: ((SPEND_RAW, 0),),
    PAYBACK_DAILY: ((CANONICAL_EVENTS, 0), (SPEND_RAW, 0)),
    COHORT_ACTIVITY: ((CANONICAL_EVENTS, WEEK_LOOKBACK_DAYS),),
}
_DAY_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")


def partition_days(lake: Lake, dataset: str) -> dict[date, Path]:
    """Every day of a daily dataset that has a partition file, with its path."""
    root = lake.dataset_dir(dataset)
    out: dict[date, Path] = {}
    if root.is_dir():
        for child in root.iterdir():
            match = _DAY_DIR.match(child.name)
            if match and (child / "part.parquet").is_file():
                out[date.fromisoformat(match.group(1))] = child / "part.parquet"
    return dict(sorted(out.items()))


def scan_days(lake: Lake, dataset: str, days: Iterable[date] | None = None) -> pl.LazyFrame:
    """A lazy scan of some (default: all) partitions of a daily dataset; typed and empty when none."""
    available = partition_days(lake, dataset)
    wanted = available if days is None else {d: available[d] for d in days if d in available}
    schema = SCHEMAS[dataset]
    if not wanted:
        return pl.LazyFrame(schema=schema)
    return pl.scan_parquet([str(p) for p in wanted.values()], hive_partitioning=False, schema=schema)


def scan_table(lake: Lake, dataset: str) -> pl.LazyFrame:
    path = lake.table_path(dataset)
    schema = SCHEMAS[dataset]
    return pl.scan_parquet(str(path), schema=schema) if path.is_file() else pl.LazyFrame(schema=schema)


def table_rows(lake: Lake, dataset: str) -> int | None:
    """Rows of the current whole-table file (None before the first write): the previous
    materialization's size, recorded before it is replaced."""
    path = lake.table_path(dataset)
    return pl.scan_parquet(str(path)).select(pl.len()).collect().item() if path.is_file() else None


def write_day(lake: Lake, dataset: str, day: date, frame: pl.DataFrame) -> Path:
    return lake.write(frame.select(list(SCHEMAS[dataset])), lake.partition_path(dataset, day))


def write_days(lake: Lake, dataset: str, days: list[date], frame: pl.DataFrame, day_of: pl.Expr) -> dict[date, int]:
    """Replace the partitions of `days` from one frame computed for all of them: each day gets
    the rows whose `day_of` is that day (a day without rows gets an empty partition). Returns
    the rows written per day. A row of any other day is a bug in the caller's computation and
    raises before anything is written."""
    parts = frame.with_columns(day_of.alias("__day")).partition_by("__day", as_dict=True, include_key=False)
    stray = sorted(str(key[0]) for key in parts if key[0] not in set(days))
    if stray:
        raise ValueError(f"{dataset}: rows for days outside {days[0]}..{days[-1]}: {', '.join(stray[:5])}")
    empty = pl.DataFrame(schema=frame.schema)
    written = {}
    for day in days:
        part = parts.get((day,), empty)
        write_day(lake, dataset, day, part)
        written[day] = part.height
    return written


def write_table(lake: Lake, dataset: str, frame: pl.DataFrame) -> Path:
    return lake.write(frame.select(list(SCHEMAS[dataset])), lake.table_path(dataset))


def write_spend_raw(lake: Lake, spend: pl.DataFrame) -> list[date]:
    """Deliver spend the way an ad-platform sync does: per day, the delivery is appended to that
    day's file (rewritten atomically); a restated row of the same key wins downstream, since
    `clean_spend` keeps the last row per key."""
    days = []
    for (day,), frame in spend.sort("spend_date").group_by("spend_date", maintain_order=True):
        existing = scan_days(lake, SPEND_RAW, [day]).collect()
        merged = pl.concat([existing, frame.select(list(SPEND_SCHEMA))]) if existing.height else frame
        write_day(lake, SPEND_RAW, day, merged)
        days.append(day)
    return days


def stale_days(lake: Lake) -> list[date]:
    """Days some derived partition must be recomputed for: its input partitions (D, or D-6..D
    for cohort activity) are newer than it, or it does not exist yet while its day's input does."""
    stale: set[date] = set()
    for derived, sources in DERIVED_FROM.items():
        have = partition_days(lake, derived)
        for source, lookback in sources:
            for day, path in partition_days(lake, source).items():
                changed = path.stat().st_mtime_ns
                for offset in range(lookback + 1):
                    target = day + timedelta(days=offset)
                    mine = have.get(target)
                    if (mine is None and offset == 0) or (mine is not None and mine.stat().st_mtime_ns < changed):
                        stale.add(target)
    return sorted(stale)


def last_day(lake: Lake) -> date | None:
    """The latest day with canonical events: the "as of" of the reports."""
    days = partition_days(lake, CANONICAL_EVENTS)
    return max(days) if days else None
