"""Asset `workspaces`: a snapshot of the tenants table in the lake."""

from __future__ import annotations

import dagster as dg

from orchestration.metadata import frame_metadata
from orchestration.resources import DatabaseResource, LakeResource
from warehouse.exports import workspaces_frame


@dg.asset(
    group_name="dimensions",
    description="Every workspace (tenant) with its reporting currency and timezone, for analysts' joins.",
)
def workspaces(database: DatabaseResource, lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: the whole table is re-read and its one Parquet file replaced atomically."""
    with database.database().read() as conn:
        frame = workspaces_frame(conn)
    store = lake.lake()
    path = store.write(frame, store.table_path("workspaces"))
    return dg.MaterializeResult(metadata=frame_metadata(frame, path=dg.MetadataValue.path(str(path))))


defs = dg.Definitions(assets=[workspaces])
