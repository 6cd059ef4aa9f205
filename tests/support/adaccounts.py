"""Ad-platform spend rows as the ad-account sync tests expect them."""

from __future__ import annotations

from datetime import date

import polars as pl

from transforms.reports.schemas import SPEND_SCHEMA
from warehouse.lake import Lake
from warehouse.reports.report_lake import write_spend_raw


def spend(lake: Lake, workspace_id: str, rows: list[tuple[date, str, str, float]], currency: str = "USD") -> None:
    frame = pl.DataFrame(
        [
            {
                "workspace_id": workspace_id,
                "spend_date": d,
                "campaign": c,
                "creative": k,
                "country": "US",
                "spend": s,
                "currency": currency,
            }
            for d, c, k, s in rows
        ],
        schema=SPEND_SCHEMA,
    )
    write_spend_raw(lake, frame)
