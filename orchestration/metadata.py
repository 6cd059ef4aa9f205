"""Metadata every asset attaches: row counts and a readable preview in the Dagster UI."""

from __future__ import annotations

from typing import Any

import dagster as dg
import polars as pl

PREVIEW_ROWS = 10


def frame_metadata(frame: pl.DataFrame, **extra: Any) -> dict[str, Any]:
    with pl.Config(
        tbl_formatting="MARKDOWN",
        tbl_hide_column_data_types=True,
        tbl_hide_dataframe_shape=True,
        tbl_rows=PREVIEW_ROWS,
        tbl_cols=-1,
        fmt_str_lengths=40,
    ):
        preview = str(frame.head(PREVIEW_ROWS))
    return {"dagster/row_count": frame.height, "preview": dg.MetadataValue.md(preview), **extra}


# Who answers for an asset (Dagster owners: `team:<name>` or an e-mail address).
INGEST_TEAM = "team:ingest"
ANALYTICS_TEAM = "team:analytics"
PLATFORM_TEAM = "team:platform"
# Kinds: what an asset is computed with and stored as (icons in the Dagster UI).
LAKE_KINDS = {"polars", "parquet"}
DUCKDB_KINDS = {"duckdb"}


def asset_tags(domain: str, tier: str) -> dict[str, str]:
    """Every asset's tags: its domain, and its tier: `raw` (arrives from outside the lake),
    `derived` (computed from the lake) or `published` (a DuckDB file the API or analysts read)."""
    return {"domain": domain, "tier": tier}
