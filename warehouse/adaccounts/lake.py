"""What the ad-account sync reads from the lake: the reports' labels and the delivered spend.

The labels are the `campaign` and `creative` values the reports group by: the installs'
(`acquisitions`, from the canonical install events' attribution) and the spend's (`spend_raw`, as
the ad-platform syncs deliver it), over the last `LABEL_DAYS` days. Only partitions inside the
window are scanned, so the cost does not grow with the lake's history.
"""

from __future__ import annotations

from datetime import date, timedelta

import polars as pl

from transforms.adaccounts.sandbox import LOOKBACK_DAYS
from transforms.reports.lifecycle import ORGANIC
from warehouse.lake import Lake
from warehouse.reports.report_lake import ACQUISITIONS, SPEND_RAW, partition_days, scan_days

LABEL_DAYS = 90


def _days(lake: Lake, dataset: str, first: date, last: date) -> list[date]:
    return [d for d in partition_days(lake, dataset) if first <= d <= last]


def report_labels(lake: Lake, *, workspace_id: str, today: date) -> tuple[set[tuple[str, str]], set[str]]:
    """(campaign, creative) pairs and campaign labels the reports show for the workspace."""
    first = today - timedelta(days=LABEL_DAYS - 1)
    frames = []
    for dataset in (ACQUISITIONS, SPEND_RAW):
        days = _days(lake, dataset, first, today)
        if days:
            frames.append(
                scan_days(lake, dataset, days)
                .filter(pl.col("workspace_id") == workspace_id)
                .select("campaign", "creative")
                .unique()
                .collect()
            )
    if not frames:
        return set(), set()
    labels = pl.concat(frames).unique().filter(pl.col("campaign").is_not_null() & (pl.col("campaign") != ORGANIC))
    campaigns = set(labels.get_column("campaign").to_list())
    pairs = {(c, k) for c, k in labels.iter_rows() if k is not None}
    return pairs, campaigns


def recent_spend(lake: Lake, *, workspace_id: str, today: date) -> pl.DataFrame:
    """The workspace's delivered spend rows of the sandbox's look-back window."""
    days = _days(lake, SPEND_RAW, today - timedelta(days=LOOKBACK_DAYS - 1), today)
    return scan_days(lake, SPEND_RAW, days).filter(pl.col("workspace_id") == workspace_id).collect()
