"""The payback cube and the cohort curves, as LazyFrame chains.

Payback grain: workspace x cohort day x group dimension x group value x day since install
(`day` = event date - install date, calendar days, 0..364). Every measure is additive and
"new on that day": installs and spend sit on day 0, trials, conversions, subscriptions,
revenue and refunds on the day they happen. So any cohort range and any window W is a
`SUM(...) WHERE day < W`, and payback is a running sum over `day` (docs/metrics.md).

Both are built from a "fine" cube keyed by all five dimensions at once, then rolled up once per
dimension: each user belongs to exactly one fine cell, so every roll-up is an exact sum.
"""

from __future__ import annotations

from datetime import date

import polars as pl

from transforms.reports.schemas import (
    COHORT_CURVE_SCHEMA,
    DIMENSIONS,
    MAX_WEEKS,
    MAX_WINDOW_DAYS,
    MEASURES,
    NEW_SUBSCRIPTIONS,
    NONE_LABEL,
    PAYBACK_SCHEMA,
    TRIAL_CONVERTED,
    TRIAL_START,
)

FINE = ("workspace_id", "cohort_date", *DIMENSIONS)
CELL = ("workspace_id", "cohort_date", "campaign", "creative", "country")


def _since_install(unit_days: int) -> pl.Expr:
    return ((pl.col("event_date") - pl.col("cohort_date")).dt.total_days() // unit_days).cast(pl.Int32)


def _zeros(*names: str) -> list[pl.Expr]:
    return [pl.lit(0, MEASURES[n]).alias(n) for n in names]


def allocated_spend(cohorts: pl.LazyFrame, spend: pl.LazyFrame) -> pl.LazyFrame:
    """Spend per fine cell. A campaign x creative x country x day cell's spend is shared among
    the offer/paywall groups of the users it brought, in proportion to their installs; a cell
    that brought nobody books its spend to offer and paywall "(none)". Totals are preserved."""
    mix = (
        cohorts.group_by(*FINE)
        .agg(pl.len().alias("n"))
        .with_columns((pl.col("n") / pl.col("n").sum().over(CELL)).alias("share"))
        .drop("n")
    )
    return (
        spend.rename({"spend_date": "cohort_date"})
        .join(mix, on=list(CELL), how="left")
        .select(
            *CELL,
            pl.col("offer").fill_null(NONE_LABEL),
            pl.col("paywall").fill_null(NONE_LABEL),
            (pl.col("spend") * pl.col("share").fill_null(1.0)).alias("spend"),
        )
    )


def _fine_payback(cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame) -> pl.LazyFrame:
    kind = pl.col("event_type")
    activity = (
        subscription.join(cohorts, on=["workspace_id", "user_id"], how="inner")
        .with_columns(_since_install(1).alias("day"))
        .filter(pl.col("day").is_between(0, MAX_WINDOW_DAYS - 1))
        .group_by(*FINE, "day")
        .agg(
            (kind == TRIAL_START).sum().cast(pl.Int64).alias("trials"),
            (kind == TRIAL_CONVERTED).sum().cast(pl.Int64).alias("trial_conversions"),
            kind.is_in(NEW_SUBSCRIPTIONS).sum().cast(pl.Int64).alias("subscriptions"),
            pl.col("revenue").sum(),
            pl.col("refund").sum().alias("refunds"),
        )
        .with_columns(*_zeros("installs", "spend"))
    )
    installs = (
        cohorts.group_by(*FINE)
        .agg(pl.len().cast(pl.Int64).alias("installs"))
        .with_columns(
            pl.lit(0, pl.Int32).alias("day"), *_zeros("spend", "trials", "trial_conversions", "subscriptions")
        )
        .with_columns(*_zeros("revenue", "refunds"))
    )
    spent = (
        allocated_spend(cohorts, spend)
        .with_columns(pl.lit(0, pl.Int32).alias("day"), *_zeros("installs", "trials", "trial_conversions"))
        .with_columns(*_zeros("subscriptions", "revenue", "refunds"))
    )
    columns = [*FINE, "day", *MEASURES]
    return (
        pl.concat([activity.select(columns), installs.select(columns), spent.select(columns)])
        .group_by(*FINE, "day")
        .agg(pl.col(list(MEASURES)).sum())
    )


def payback_cube(cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame) -> pl.LazyFrame:
    """The payback cube (PAYBACK_SCHEMA), sorted by workspace, dimension, cohort date, value, day
    (the order the API filters on, so DuckDB's zone maps skip most of the table)."""
    fine = _fine_payback(cohorts, subscription, spend)
    group = ["workspace_id", "cohort_date", "dimension", "value"]
    rolled = [
        fine.group_by("workspace_id", "cohort_date", pl.col(d).alias("value"), "day")
        .agg(pl.col(list(MEASURES)).sum())
        .with_columns(pl.lit(d).alias("dimension"))
        for d in DIMENSIONS
    ]
    return (
        pl.concat(rolled)
        .with_columns(
            pl.col("revenue").cum_sum().over(group, order_by="day").alias("cumulative_revenue"),
            (pl.col("revenue") - pl.col("refunds"))
            .cum_sum()
            .over(group, order_by="day")
            .alias("cumulative_net_revenue"),
        )
        .select(list(PAYBACK_SCHEMA))
        .cast(PAYBACK_SCHEMA)  # type: ignore[arg-type]
        .sort("workspace_id", "dimension", "cohort_date", "value", "day")
    )


def cohort_curves(cohorts: pl.LazyFrame, subscription: pl.LazyFrame, as_of: date) -> pl.LazyFrame:
    """Weekly curves per cohort day and group (COHORT_CURVE_SCHEMA), complete weeks only.

    A user is active in week w (days 7w..7w+6 after install) when any event of theirs falls in
    it; the install makes everyone active in week 0. Week w of a cohort is listed once it is
    over by `as_of` (the last day with data), up to MAX_WEEKS, so a young cohort never shows a
    half-observed week as churn.
    """
    keys = ["workspace_id", "user_id"]
    user_weeks = pl.concat(
        [
            subscription.join(cohorts.select(*keys, "cohort_date"), on=keys, how="inner")
            .with_columns(_since_install(7).alias("week"))
            .filter(pl.col("week").is_between(0, MAX_WEEKS - 1))
            .select(*keys, "week", (pl.col("revenue") - pl.col("refund")).alias("net_revenue")),
            cohorts.select(*keys, pl.lit(0, pl.Int32).alias("week"), pl.lit(0.0).alias("net_revenue")),
        ]
    )
    fine = (
        user_weeks.group_by(*keys, "week")
        .agg(pl.col("net_revenue").sum())
        .join(cohorts, on=keys, how="inner")
        .group_by(*FINE, "week")
        .agg(pl.len().cast(pl.Int64).alias("active_users"), pl.col("net_revenue").sum())
    )
    sizes = cohorts.group_by(*FINE).agg(pl.len().cast(pl.Int64).alias("installs"))
    group = ["workspace_id", "cohort_date", "dimension", "value"]
    complete = ((pl.lit(as_of) - pl.col("cohort_date")).dt.total_days() + 1) // 7
    frames = []
    for d in DIMENSIONS:
        size = sizes.group_by("workspace_id", "cohort_date", pl.col(d).alias("value")).agg(pl.col("installs").sum())
        act = fine.group_by("workspace_id", "cohort_date", pl.col(d).alias("value"), "week").agg(
            pl.col("active_users", "net_revenue").sum()
        )
        frames.append(
            size.with_columns(complete.clip(upper_bound=MAX_WEEKS).cast(pl.Int32).alias("weeks"))
            .filter(pl.col("weeks") > 0)
            .with_columns(pl.int_ranges(0, "weeks", dtype=pl.Int32).alias("week"))
            .explode("week")
            .join(act, on=["workspace_id", "cohort_date", "value", "week"], how="left")
            .with_columns(pl.lit(d).alias("dimension"), pl.col("active_users", "net_revenue").fill_null(0))
        )
    return (
        pl.concat(frames)
        .with_columns(pl.col("net_revenue").cum_sum().over(group, order_by="week").alias("cumulative_net_revenue"))
        .select(list(COHORT_CURVE_SCHEMA))
        .cast(COHORT_CURVE_SCHEMA)  # type: ignore[arg-type]
        .sort("workspace_id", "dimension", "cohort_date", "value", "week")
    )
