"""Partitions and start dates shared by every daily asset.

Daily partitions are the unit of incremental work and of parallelism: a late event re-runs its
own day, a six-hourly refresh touches only changed days. `end_offset=1` includes today, since
events of the current UTC day arrive all day long.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, timedelta

import dagster as dg

from transforms.events import LAKE_START

# The earliest UTC day any FloKit data can belong to (transforms.events.LAKE_START): sources
# refuse or drop events before it.
LAKE_START_DATE = LAKE_START.isoformat()

daily_partitions = dg.DailyPartitionsDefinition(start_date=LAKE_START_DATE, end_offset=1, timezone="UTC")

# The run tags that make a run cover a range of partitions (Dagster's documented tag names; the
# constants themselves live in a private Dagster module, which FloKit does not import).
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
# On a range run of the reports: each daily asset recomputes only the days of the range that are
# stale for it as it starts (`warehouse.reports.report_lake.stale_for`). The refreshes FloKit requests
# carry it; a run without it (a backfill from the Dagster UI) recomputes every day of its range.
STALE_DAYS_ONLY_TAG = "flokit/stale_days_only"


def run_days(context: dg.AssetExecutionContext) -> list[date]:
    """The UTC days of the partitions a run covers (one day, or a range run's every day)."""
    window = context.partition_time_window
    first, last = window.start.date(), window.end.date()
    return [first + timedelta(days=i) for i in range((last - first).days)]


# Days this close share a range run: each day of a range run costs about 10 ms of Dagster event
# log per asset even when nothing is recomputed (6 daily report assets: ~60 ms a day), a run of
# its own about 0.4 s (measured on a SQLite instance: 1 000 partitions x 6 assets in one range
# run 63.5 s, one partition 0.4 s). A week of gap is ~0.4 s: about what a separate run costs.
MAX_GAP_DAYS = 7


def day_blocks(days: Iterable[date]) -> list[list[date]]:
    """The days in blocks of nearby days, oldest first, a new block wherever more than
    MAX_GAP_DAYS days separate two: one range run per block, so that a late event on an old day
    costs a run of its own, not a run over every day since."""
    blocks: list[list[date]] = []
    for day in sorted(days):
        if blocks and (day - blocks[-1][-1]).days <= MAX_GAP_DAYS:
            blocks[-1].append(day)
        else:
            blocks.append([day])
    return blocks


def range_tags(days: Iterable[date]) -> dict[str, str]:
    """Run tags that make one run cover the daily partitions from the first to the last day
    (assets with a single-run backfill policy then see the whole range in one run)."""
    ordered = sorted(days)
    return {
        ASSET_PARTITION_RANGE_START_TAG: ordered[0].isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: ordered[-1].isoformat(),
    }


def range_label(tags: Mapping[str, str]) -> str | None:
    """`first..last` of a range run's tags (a single day as itself); None for other runs."""
    first, last = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if not first:
        return None
    return first if first == last else f"{first}..{last}"
