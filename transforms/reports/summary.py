"""The payback report rows from the cube's per-day sums: the spec's metrics, in one place.

The API's query sums the cube per (group value, day since install) for the requested cohorts;
this turns those few hundred rows into one row per group (docs/metrics.md defines each field).
"""

from __future__ import annotations

import polars as pl

ROAS_DAYS = 30  # spec: `roas_30d` is always the first 30 days, whatever the payback window

DAILY_SUMS_SCHEMA = pl.Schema(
    {
        "value": pl.String(),
        "day": pl.Int32(),
        "installs": pl.Int64(),
        "spend": pl.Float64(),
        "trials": pl.Int64(),
        "trial_conversions": pl.Int64(),
        "subscriptions": pl.Int64(),
        "net_revenue": pl.Float64(),
    }
)


def payback_summary(daily: pl.LazyFrame, window: int) -> pl.LazyFrame:
    """One row per group value: spend, installs, window counts, 30-day net revenue and the
    payback day (first day < window whose running net revenue covers the spend; null if none
    or no spend)."""
    in_window = pl.col("day") < window
    paid_back = in_window & (pl.col("total_spend") > 0) & (pl.col("cumulative_net_revenue") >= pl.col("total_spend"))
    return (
        daily.sort("value", "day")
        .with_columns(
            pl.col("net_revenue").cum_sum().over("value").alias("cumulative_net_revenue"),
            pl.col("spend").sum().over("value").alias("total_spend"),
        )
        .group_by("value")
        .agg(
            pl.col("spend").sum(),
            pl.col("installs").sum(),
            pl.col("trials").filter(in_window).sum(),
            pl.col("trial_conversions").filter(in_window).sum(),
            pl.col("subscriptions").filter(in_window).sum(),
            pl.col("net_revenue").filter(pl.col("day") < ROAS_DAYS).sum().alias("revenue_30d"),
            pl.col("day").filter(paid_back).min().alias("payback_day"),
        )
        .sort("value")
    )
