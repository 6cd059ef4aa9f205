"""Asset `workspaces`: a snapshot of the tenants table in the lake."""

from __future__ import annotations

import dagster as dg

from orchestration.metadata import LAKE_KINDS, PLATFORM_TEAM, asset_tags, frame_metadata
from orchestration.resources import DatabaseResource, DataDirResource
from warehouse.exports import WORKSPACES_DATASET, workspaces_frame


@dg.asset(
    name=WORKSPACES_DATASET,
    group_name="workspaces",  # every asset's group is its domain
    kinds=LAKE_KINDS,
    owners=[PLATFORM_TEAM],
    tags=asset_tags("workspaces", "raw"),
    description="Every workspace (tenant) with its reporting currency and timezone, for analysts' joins.",
)
def workspaces(database: DatabaseResource, data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: the whole table is re-read and its one Parquet file replaced atomically."""
    with database.database().read() as conn:
        frame = workspaces_frame(conn)
    lake = data_dir.paths.lake()
    written = lake.write_table(WORKSPACES_DATASET, frame)
    return dg.MaterializeResult(metadata=frame_metadata(frame, path=dg.MetadataValue.path(written.location)))
