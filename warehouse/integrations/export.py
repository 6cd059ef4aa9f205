"""The lake side of the warehouse export: which datasets leave FloKit, their partition files as
they are now, and one workspace's rows of a partition as the Parquet that is sent.

Exported: the raw facts (`canonical_events`), the cleaned spend in the reporting currency
(`spend`), the daily report cubes (`payback_daily`, `cohort_activity`) and the whole report tables
(`payback`, `cohort_curves`, `ltv`): what the analyst catalog and the v1 reports publish, plus the
daily cubes they are summed from, which are the incremental way to keep a warehouse in step (a
new day is one new partition; `payback` is replaced whole at every refresh). The intermediate
datasets (`acquisitions`, `subscription_events`, `active_days`) and the input `spend_raw` stay
inside: they are recomputed from the exported ones and change shape with FloKit's internals.

Every lake file holds every workspace's rows, so what is sent is always filtered to the one
workspace of the integration.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from transforms.integrations.warehouse_export import Partition
from warehouse.lake import Lake
from warehouse.reports.report_lake import (
    CANONICAL_EVENTS,
    COHORT_ACTIVITY,
    COHORT_CURVES,
    LTV,
    PAYBACK,
    PAYBACK_DAILY,
    SCHEMAS,
    SPEND,
)


@dataclass(frozen=True)
class ExportedDataset:
    name: str
    daily: bool

    @property
    def schema(self) -> dict[str, pl.DataType]:
        return SCHEMAS[self.name]


EXPORTED: tuple[ExportedDataset, ...] = (
    ExportedDataset(CANONICAL_EVENTS, daily=True),
    ExportedDataset(SPEND, daily=True),
    ExportedDataset(PAYBACK_DAILY, daily=True),
    ExportedDataset(COHORT_ACTIVITY, daily=True),
    ExportedDataset(PAYBACK, daily=False),
    ExportedDataset(COHORT_CURVES, daily=False),
    ExportedDataset(LTV, daily=False),
)
BY_NAME = {d.name: d for d in EXPORTED}


def partitions(lake: Lake) -> list[Partition]:
    """Every file of the exported datasets, with the stamp (the time it was written, on the
    lake's clock) and size it has now (day order)."""
    out: list[Partition] = []
    for dataset in EXPORTED:
        files = list(lake.days(dataset.name).values()) if dataset.daily else [lake.table(dataset.name)]
        out.extend(Partition(dataset.name, f.day, f.stamp, f.size) for f in files if f is not None)
    return out


def workspace_rows(lake: Lake, partition: Partition, workspace_id: str) -> pl.DataFrame:
    """The workspace's rows of one partition, in the dataset's columns and the file's order.

    Read with today's schema: a partition written by an older FloKit with other columns is
    one the next refresh recomputes (`store.stale_for`), and fails here until then rather
    than sending a table whose columns differ from the Snowflake table's."""
    dataset = BY_NAME[partition.dataset]
    found = lake.days(dataset.name).get(partition.day) if partition.day is not None else lake.table(dataset.name)
    if found is None:
        raise FileNotFoundError(f"{lake.describe(dataset.name)}: no partition {partition.slot} any more")
    return lake.scan([found], dataset.schema).filter(pl.col("workspace_id") == workspace_id).collect()
