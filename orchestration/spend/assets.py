"""`spend_raw`: the daily spend files the ad-platform syncs deliver into the lake.

FloKit does not compute this dataset; it arrives from outside (an ad-platform sync, or
`flokit demo seed` through `warehouse.reports.report_lake.write_spend_raw`), so it is an external
asset: declared here so the graph shows who owns it and what it holds, never materialized by
Dagster. The reports' daily `spend` asset reads it, and the six-hourly refresh notices changed
days by their files (`warehouse.reports.report_lake.stale_days`).
"""

from __future__ import annotations

import dagster as dg

from orchestration.metadata import ANALYTICS_TEAM, asset_tags
from warehouse.reports.report_lake import SPEND_RAW

spend_raw = dg.AssetSpec(
    SPEND_RAW,
    group_name="spend",
    kinds={"parquet"},
    owners=[ANALYTICS_TEAM],
    tags=asset_tags("spend", "raw"),
    description=(
        "Daily ad spend as the ad-platform syncs deliver it: workspace, day, campaign, creative, country, "
        "spend and currency, appended per delivery (the last row per key wins downstream)."
    ),
    metadata={"layout": f"<data dir>/lake/{SPEND_RAW}/date=YYYY-MM-DD/part.parquet"},
)
