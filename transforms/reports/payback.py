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
    COHORT_ACTIVITY_SCHEMA,
    COHORT_CURVE_SCHEMA,
    DIMENSIONS,
    MAX_WEEKS,
    MAX_WINDOW_DAYS,
    MEASURES,
    NEW_SUBSCRIPTIONS,
    NONE_LABEL,
    PAYBACK_DAILY_SCHEMA,
    PAYBACK_SCHEMA,
    TRIAL_CONVERTED,
    TRIAL_START,
)

FINE = ("workspace_id", "cohort_date", *DIMENSIONS)
CELL = ("workspace_id", "cohort_date", "campaign", "creative", "country")


def _categorical(frame: pl.LazyFrame, columns: tuple[str, ...] = DIMENSIONS) -> pl.LazyFrame:
    """Group-by labels as categoricals: joins and group-bys on them cost clearly less CPU than on
    strings (docs/benchmarks.md); outputs are cast back to strings."""
    return frame.with_columns(pl.col(list(columns)).cast(pl.Categorical))


def _since_install(unit_days: int) -> pl.Expr:
    return ((pl.col("event_date") - pl.col("cohort_date")).dt.total_days() // unit_days).cast(pl.Int32)


def _zeros(*names: str) -> list[pl.Expr]:
    return [pl.lit(0, MEASURES[n]).alias(n) for n in names]


def allocated_spend(installs: pl.LazyFrame, spend: pl.LazyFrame) -> pl.LazyFrame:
    """Spend per fine cell, from installs per fine cell. A campaign x creative x country x day
    cell's spend is shared among the offer/paywall groups of the users it brought, in proportion
    to their installs; a cell that brought nobody books its spend to offer and paywall "(none)".
    Totals are preserved."""
    mix = installs.select(*FINE, (pl.col("installs") / pl.col("installs").sum().over(CELL)).alias("share"))
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


def _fine_rows(
    cohorts: pl.LazyFrame, new_cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame
) -> pl.LazyFrame:
    """Fine-cell measures from these events (joined to all cohorts), the installs of the new
    cohorts and this spend."""
    kind = pl.col("event_type")
    cohorts, new_cohorts = _categorical(cohorts), _categorical(new_cohorts)
    spend = _categorical(spend, ("campaign", "creative", "country"))
    # Only events that move a payback measure (paywall views and cancellations move none):
    # filtering before the join skips most rows.
    moves = kind.is_in((TRIAL_START, *NEW_SUBSCRIPTIONS)) | (pl.col("revenue") != 0) | (pl.col("refund") != 0)
    activity = (
        subscription.filter(moves)
        .join(cohorts, on=["workspace_id", "user_id"], how="inner")
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
        # A day with only paywall views moves no payback measure: dropping it keeps the cube (and
        # each API query) about ten times smaller without changing any sum.
        .filter(
            (pl.col("trials") + pl.col("trial_conversions") + pl.col("subscriptions") > 0)
            | (pl.col("revenue") != 0)
            | (pl.col("refunds") != 0)
        )
        .with_columns(*_zeros("installs", "spend"))
    )
    # Read twice (install rows, spend shares): cached so the group-by runs once.
    per_cell = new_cohorts.group_by(*FINE).agg(pl.len().cast(pl.Int64).alias("installs")).cache()
    installs = per_cell.with_columns(
        pl.lit(0, pl.Int32).alias("day"), *_zeros("spend", "trials", "trial_conversions")
    ).with_columns(*_zeros("subscriptions", "revenue", "refunds"))
    spent = (
        allocated_spend(per_cell, spend)
        .with_columns(pl.lit(0, pl.Int32).alias("day"), *_zeros("installs", "trials", "trial_conversions"))
        .with_columns(*_zeros("subscriptions", "revenue", "refunds"))
    )
    columns = [*FINE, "day", *MEASURES]
    return pl.concat([activity.select(columns), installs.select(columns), spent.select(columns)])


def _roll_up(fine: pl.LazyFrame, units: tuple[str, ...], measures: list[str]) -> pl.LazyFrame:
    """Fine cells summed once per group-by dimension: (workspace, cohort, dimension, value, units)."""
    return pl.concat(
        [
            fine.group_by("workspace_id", "cohort_date", pl.col(d).alias("value"), *units)
            .agg(pl.col(measures).sum())
            .with_columns(pl.lit(d).alias("dimension"))
            for d in DIMENSIONS
        ]
    )


def daily_rows(
    cohorts: pl.LazyFrame, new_cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame
) -> pl.LazyFrame:
    """Cube rows (PAYBACK_DAILY_SCHEMA, no running sums) from some days' events and spend.

    For one daily partition D: `subscription` and `spend` of day D, `new_cohorts` the users
    installed on D, `cohorts` every user. Partitions have disjoint keys (cohort_date + day = D),
    so the whole cube is their concatenation."""
    return (
        _roll_up(_fine_rows(cohorts, new_cohorts, subscription, spend), ("day",), list(MEASURES))
        .select(list(PAYBACK_DAILY_SCHEMA))
        .cast(PAYBACK_DAILY_SCHEMA)
    )


def cumulate(rows: pl.LazyFrame) -> pl.LazyFrame:
    """The cube (PAYBACK_SCHEMA) from daily rows: running sums over `day`, sorted by workspace,
    dimension, cohort date, value, day (the API's filter order, so DuckDB's zone maps skip most
    of the table)."""
    group = ["workspace_id", "cohort_date", "dimension", "value"]
    return (
        rows.sort("workspace_id", "dimension", "cohort_date", "value", "day")
        .with_columns(
            pl.col("revenue").cum_sum().over(group).alias("cumulative_revenue"),
            (pl.col("revenue") - pl.col("refunds")).cum_sum().over(group).alias("cumulative_net_revenue"),
        )
        .select(list(PAYBACK_SCHEMA))
        .cast(PAYBACK_SCHEMA)
    )


def payback_cube(cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame) -> pl.LazyFrame:
    """The whole cube at once (tests, benchmark): every day's rows, then running sums."""
    return cumulate(daily_rows(cohorts, cohorts, subscription, spend))


def cohort_activity(
    cohorts: pl.LazyFrame,
    new_cohorts: pl.LazyFrame,
    active: pl.LazyFrame,
    subscription: pl.LazyFrame,
    counted: tuple[date, date] | None = None,
) -> pl.LazyFrame:
    """Weekly activity rows (COHORT_ACTIVITY_SCHEMA plus `activity_date`), additive across days.

    A user counts as active in week w >= 1 on their first active day of that week (`active`:
    ACTIVE_DAY_SCHEMA rows), and in week 0 on the install (new_cohorts); net revenue counts on
    the day of each subscription event. `activity_date` is that day, so the rows of several days
    split into daily partitions. For days D1..D2, both inputs are days D1-6..D2 (enough to see
    an earlier active day of the same week) and `counted` is (D1, D2): only activations and
    revenue of those days are counted. With `counted` None, every day counts.
    """
    keys = ["workspace_id", "user_id"]
    cohorts, new_cohorts = _categorical(cohorts), _categorical(new_cohorts)
    days = counted or (date.min, date.max)
    measures = ("active_users", "net_revenue")
    # Active days are the bulk (a row per user and day): after one join on the string keys they
    # are grouped and joined back by the user's row number, an integer.
    numbered = cohorts.with_row_index("_user")
    activations = (
        active.select(*keys, "event_date")
        .join(numbered.select(*keys, "_user", "cohort_date"), on=keys, how="inner")
        .with_columns(_since_install(7).alias("week"))
        .filter(pl.col("week").is_between(1, MAX_WEEKS - 1))
        .group_by("_user", "week")
        .agg(pl.col("event_date").min().alias("activity_date"))
        .filter(pl.col("activity_date").is_between(*days))
        .join(numbered.select("_user", *FINE), on="_user", how="inner")
        .select(*FINE, "week", "activity_date", pl.lit(1, pl.Int64).alias(measures[0]), pl.lit(0.0).alias(measures[1]))
    )
    revenue = (
        subscription.filter(
            pl.col("event_date").is_between(*days) & ((pl.col("revenue") != 0) | (pl.col("refund") != 0))
        )
        .join(cohorts, on=keys, how="inner")
        .with_columns(_since_install(7).alias("week"))
        .filter(pl.col("week").is_between(0, MAX_WEEKS - 1))
        .select(
            *FINE,
            "week",
            pl.col("event_date").alias("activity_date"),
            pl.lit(0, pl.Int64).alias(measures[0]),
            (pl.col("revenue") - pl.col("refund")).alias(measures[1]),
        )
    )
    installed = new_cohorts.select(
        *FINE,
        pl.lit(0, pl.Int32).alias("week"),
        pl.col("cohort_date").alias("activity_date"),
        pl.lit(1, pl.Int64).alias(measures[0]),
        pl.lit(0.0).alias(measures[1]),
    )
    return (
        _roll_up(pl.concat([activations, revenue, installed]), ("week", "activity_date"), list(measures))
        .filter((pl.col("active_users") > 0) | (pl.col("net_revenue") != 0))
        .select(*COHORT_ACTIVITY_SCHEMA, "activity_date")
        .cast(COHORT_ACTIVITY_SCHEMA)
    )


def cohort_curves(activity: pl.LazyFrame, as_of: date) -> pl.LazyFrame:
    """Weekly curves per cohort day and group (COHORT_CURVE_SCHEMA), complete weeks only.

    Week w of a cohort (days 7w..7w+6 after install) is listed once it is over by `as_of`
    (the last day with data), up to MAX_WEEKS, so a young cohort never shows a half-observed
    week as churn; installs are the week-0 actives (everyone is active in the install week).
    """
    group = ["workspace_id", "cohort_date", "dimension", "value"]
    summed = activity.group_by(*group, "week").agg(pl.col("active_users", "net_revenue").sum())
    sizes = summed.filter(pl.col("week") == 0).select(*group, pl.col("active_users").alias("installs"))
    complete = ((pl.lit(as_of) - pl.col("cohort_date")).dt.total_days() + 1) // 7
    return (
        sizes.filter(pl.col("installs") > 0)
        .with_columns(complete.clip(upper_bound=MAX_WEEKS).cast(pl.Int32).alias("weeks"))
        .filter(pl.col("weeks") > 0)
        .with_columns(pl.int_ranges(0, "weeks", dtype=pl.Int32).alias("week"))
        .explode("week")
        .join(summed, on=[*group, "week"], how="left")
        .with_columns(pl.col("active_users", "net_revenue").fill_null(0))
        .sort("workspace_id", "dimension", "cohort_date", "value", "week")
        .with_columns(pl.col("net_revenue").cum_sum().over(group).alias("cumulative_net_revenue"))
        .select(list(COHORT_CURVE_SCHEMA))
        .cast(COHORT_CURVE_SCHEMA)
    )


def curves_from_events(
    cohorts: pl.LazyFrame, active: pl.LazyFrame, subscription: pl.LazyFrame, as_of: date
) -> pl.LazyFrame:
    """The whole cohort curves at once (tests, benchmark)."""
    return cohort_curves(cohort_activity(cohorts, cohorts, active, subscription), as_of)
