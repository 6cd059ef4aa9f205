"""Asset `analyst_catalog`: the DuckDB file analysts open, built from the views domains declare.

Each domain's `CatalogEntry`s (a view and the asset that writes its dataset) are listed in
`CATALOG`; the asset depends on those assets and builds every view, and `analyst_catalog_sensor`
rebuilds the file after any of them materializes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from orchestration.metadata import ANALYTICS_TEAM, DUCKDB_KINDS, asset_tags, frame_metadata
from orchestration.resources import DataDirResource
from warehouse.analyst_views import ANALYST_VIEWS
from warehouse.catalog import CatalogView, build_catalog, preview, preview_lake, publish_catalog
from warehouse.events.views import CANONICAL_EVENTS_VIEW
from warehouse.lake import LocalLake
from warehouse.paths import PUBLISHED_CATALOG
from warehouse.reports.report_lake import PURCHASES, SUBSCRIPTION_METRICS, SUBSCRIPTION_MOVEMENTS


@dataclass(frozen=True)
class CatalogEntry:
    view: CatalogView
    upstream: dg.AssetKey  # the asset that writes the view's lake dataset (named after it)


# Datasets written by an asset named after another one: the subscription metrics asset writes
# the movements and the purchases beside the metrics.
WRITTEN_BY = {SUBSCRIPTION_MOVEMENTS: SUBSCRIPTION_METRICS, PURCHASES: SUBSCRIPTION_METRICS}
CATALOG: list[CatalogEntry] = [
    CatalogEntry(view, dg.AssetKey(WRITTEN_BY.get(view.dataset, view.dataset))) for view in ANALYST_VIEWS
]

PREVIEW_VIEW = CANONICAL_EVENTS_VIEW.name


@dg.asset(
    group_name="catalog",
    deps=[entry.upstream for entry in CATALOG],
    kinds=DUCKDB_KINDS,
    owners=[ANALYTICS_TEAM],
    tags=asset_tags("catalog", "published"),
    description="warehouse.duckdb: one view per lake dataset, rebuilt in a temp file and swapped in atomically.",
)
def analyst_catalog(data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: the file is rebuilt whole from the lake and renamed over the live one, so
    readers holding the old file keep reading it and never see a half-built catalog. With the
    lake in an object store, the catalog's description is published there instead, for
    `flokit catalog pull` (warehouse/catalog.py)."""
    paths, views = data_dir.paths, [entry.view for entry in CATALOG]
    lake, store = paths.lake(), paths.object_store()
    if store is not None:
        counts = publish_catalog(store, lake, views, at=datetime.now(UTC))
        latest = preview_lake(lake, CANONICAL_EVENTS_VIEW, order_by="occurred_at")
        where = store.url(PUBLISHED_CATALOG)
    else:
        assert isinstance(lake, LocalLake)  # no object store: the lake is a directory
        counts = build_catalog(paths.catalog, lake, views)
        latest = preview(paths.catalog, PREVIEW_VIEW, order_by="occurred_at")
        where = str(paths.catalog)
    return dg.MaterializeResult(
        metadata={
            **frame_metadata(latest, path=dg.MetadataValue.path(where)),
            "dagster/row_count": counts.get(PREVIEW_VIEW, 0),
            **{f"rows/{view}": rows for view, rows in counts.items()},
        }
    )
