"""Asset `analyst_catalog`: the DuckDB file analysts open, built from the views domains declare.

Each domain appends its `CatalogEntry`s to `CATALOG` (a view and the asset that writes its
dataset); the asset then depends on those assets, builds every view, and the catalog sensor
rebuilds the file after any of them materializes.
"""

from __future__ import annotations

from dataclasses import dataclass

import dagster as dg
import duckdb
import polars as pl

from orchestration.metadata import frame_metadata
from orchestration.resources import LakeResource
from warehouse.catalog import CatalogView, build_catalog
from warehouse.events.views import CANONICAL_EVENTS_VIEW
from warehouse.reports.catalog_views import COHORTS_VIEW, PAYBACK_VIEW, SPEND_VIEW


@dataclass(frozen=True)
class CatalogEntry:
    view: CatalogView
    upstream: dg.AssetKey  # the asset that writes the view's lake dataset


CATALOG: list[CatalogEntry] = [
    CatalogEntry(CANONICAL_EVENTS_VIEW, dg.AssetKey("canonical_events")),
    CatalogEntry(PAYBACK_VIEW, dg.AssetKey("payback")),
    CatalogEntry(COHORTS_VIEW, dg.AssetKey("cohort_curves")),
    CatalogEntry(SPEND_VIEW, dg.AssetKey("spend")),
]

PREVIEW_VIEW = "canonical_events"


def _preview(path: str, view: str) -> pl.DataFrame:
    """A few rows read back from the published file, read-only, as an analyst would."""
    with duckdb.connect(path, read_only=True) as con:
        return con.sql(f'SELECT * FROM "{view}" ORDER BY occurred_at DESC LIMIT 10').pl()  # noqa: S608 (declared name)


@dg.asset(
    group_name="catalog",
    deps=[entry.upstream for entry in CATALOG],
    description="warehouse.duckdb: one view per lake dataset, rebuilt in a temp file and swapped in atomically.",
)
def analyst_catalog(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: the file is rebuilt whole from the lake and renamed over the live one, so
    readers holding the old file keep reading it and never see a half-built catalog."""
    path = lake.catalog_path
    counts = build_catalog(path, lake.lake(), [entry.view for entry in CATALOG])
    preview = _preview(str(path), PREVIEW_VIEW)
    return dg.MaterializeResult(
        metadata={
            **frame_metadata(preview, path=dg.MetadataValue.path(str(path))),
            "dagster/row_count": counts.get(PREVIEW_VIEW, 0),
            **{f"rows/{view}": rows for view, rows in counts.items()},
        }
    )


analyst_catalog_job = dg.define_asset_job("analyst_catalog_job", selection=[analyst_catalog])


@dg.sensor(
    name="analyst_catalog_sensor",
    job=analyst_catalog_job,
    minimum_interval_seconds=30,  # a rebuild every 30 s at most, however many partitions land
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Rebuilds the catalog after any asset that feeds it has materialized.",
)
def analyst_catalog_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    latest = 0
    for entry in CATALOG:
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=entry.upstream), limit=1, ascending=False
        ).records
        if records:
            latest = max(latest, records[0].storage_id)
    if latest <= int(context.cursor or 0):
        return dg.SkipReason("no new upstream materializations")
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=f"analyst_catalog:{latest}")], cursor=str(latest))


defs = dg.Definitions(assets=[analyst_catalog], jobs=[analyst_catalog_job], sensors=[analyst_catalog_sensor])
