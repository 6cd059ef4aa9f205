"""The catalog sensor: a rebuild after any asset that feeds the catalog has materialized."""

from __future__ import annotations

import dagster as dg

from orchestration.catalog.assets import CATALOG
from orchestration.catalog.jobs import analyst_catalog_job


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
