"""The growth-action signals: per cohort day and fine cell, the counts and the per-user revenue
sufficient statistics the actions engine's tests read (design note actions-engine.md §2, §5.1).

Grain: workspace x cohort day x fine cell (campaign, creative, country, offer, paywall: every
user has exactly one label of each, `lifecycle.user_cohorts`), so any coarser cell the engine
compares (campaign x country, a creative against the rest of its campaign, offer x paywall x
country) is an exact sum of rows. The published cube cannot answer those: it is rolled up one
dimension at a time.

Why the statistics are per user and not per day: a mean's variance needs Σx² over users, and
a user's revenue at a horizon is a sum over days, so Σx² does not add up across days the way
the cube's measures do. Each cohort day's rows are therefore computed from all of its users'
events of days since install 0..SIGNAL_WINDOW_DAYS-1, in one piece: the dataset is partitioned
by cohort day, and partition D reads events of days D..D+29 (the store recomputes it when any of
them is rewritten, `warehouse.reports.report_lake.DERIVED_FROM`).

Money goes through the cube's path: revenue and refunds are `subscription_events`' amounts in
the reporting currency (ECB rate of the event's day), spend is `spend`'s, allocated to offer and
paywall by `payback.allocated_spend`; so Σ spend per campaign equals the cube's, and
`net_rev_d30` summed over a campaign equals the cube's net revenue of days < 30.
"""

from __future__ import annotations

from datetime import date

import polars as pl

from transforms.reports.payback import FINE, allocated_spend
from transforms.reports.schemas import (
    ACTION_SIGNAL_SCHEMA,
    NEW_SUBSCRIPTIONS,
    NONE_LABEL,
    REFUND,
    SIGNAL_HORIZONS,
    SIGNAL_WINDOW_DAYS,
    TRIAL_CONVERTED,
    TRIAL_START,
)

_KEYS = ["workspace_id", "user_id"]
_COUNTS = ("installs", "paywall_users", "trials", "trial_conversions", "subscriptions", "refunds_n")


def complete_days(cohort_date: pl.Expr, observed_through: date) -> pl.Expr:
    """Days since install fully observed: those before `observed_through`, the latest day the
    lake has events of (still filling while it is today), at most SIGNAL_WINDOW_DAYS. Horizon D
    of a row is complete when `complete_days >= D`, i.e. cohort_date + D <= observed_through."""
    days = (pl.lit(observed_through) - cohort_date).dt.total_days()
    return days.clip(0, SIGNAL_WINDOW_DAYS).cast(pl.Int32)


def _unless(unknown: pl.Expr, value: pl.Expr) -> pl.Expr:
    return pl.when(unknown).then(None).otherwise(value)


def action_signals(
    new_cohorts: pl.LazyFrame, subscription: pl.LazyFrame, spend: pl.LazyFrame, observed_through: date
) -> pl.LazyFrame:
    """Signal rows (ACTION_SIGNAL_SCHEMA) of some cohort days.

    `new_cohorts`: the users (USER_COHORT_SCHEMA, each user's earliest acquisition) whose cohort
    day is one of these days; `subscription`: subscription events of those days through the last
    one + SIGNAL_WINDOW_DAYS - 1 (more is ignored); `spend`: the cleaned spend of those days;
    `observed_through`: the latest day with events in the lake (`complete_days`).

    Counts are those of days since install < SIGNAL_WINDOW_DAYS: `trials`, `trial_conversions`
    and `subscriptions` count events as the cube does, `refunds_n` counts users with a refund,
    `paywall_users` users who met a paywall on their install day (their `paywall` label).
    `net_rev_dD` = Σ x_i and `net_rev_sq_dD` = Σ x_i² over every installed user of the cell,
    x_i = revenue - refunds of the user's days since install < D (users without revenue add 0
    to both; their count is `installs`). A cell with spend but no installs has a row with
    `installs` 0 (its spend is booked to offer and paywall "(none)", as in the cube). A sum
    that includes an amount that could not be converted to the reporting currency (the asset
    checks stop the cube on those) is null: unknown, never silently short.
    """
    kind = pl.col("event_type")
    day = (pl.col("event_date") - pl.col("cohort_date")).dt.total_days()
    net = pl.col("revenue").fill_null(0.0) - pl.col("refund").fill_null(0.0)
    unconverted = pl.col("revenue").is_null() | pl.col("refund").is_null()
    per_user = (
        subscription.join(new_cohorts, on=_KEYS, how="inner")
        .with_columns(day.alias("_day"))
        .filter(pl.col("_day").is_between(0, SIGNAL_WINDOW_DAYS - 1))
        .group_by("user_id", *FINE)
        .agg(
            (kind == TRIAL_START).sum().cast(pl.Int64).alias("trials"),
            (kind == TRIAL_CONVERTED).sum().cast(pl.Int64).alias("trial_conversions"),
            kind.is_in(NEW_SUBSCRIPTIONS).sum().cast(pl.Int64).alias("subscriptions"),
            (kind == REFUND).any().cast(pl.Int64).alias("refunds_n"),
            *[net.filter(pl.col("_day") < h).sum().alias(f"_x{h}") for h in SIGNAL_HORIZONS],
            *[unconverted.filter(pl.col("_day") < h).any().alias(f"_u{h}") for h in SIGNAL_HORIZONS],
        )
    )
    # An amount that could not be converted leaves its horizons' sums unknown (null), not short.
    activity = per_user.group_by(*FINE).agg(
        pl.col("trials", "trial_conversions", "subscriptions", "refunds_n").sum(),
        *[_unless(pl.col(f"_u{h}").any(), pl.col(f"_x{h}").sum()).alias(f"net_rev_d{h}") for h in SIGNAL_HORIZONS],
        *[
            _unless(pl.col(f"_u{h}").any(), (pl.col(f"_x{h}") ** 2).sum()).alias(f"net_rev_sq_d{h}")
            for h in SIGNAL_HORIZONS
        ],
    )
    installs = (
        new_cohorts.group_by(*FINE)
        .agg(
            pl.len().cast(pl.Int64).alias("installs"),
            (pl.col("paywall") != NONE_LABEL).sum().cast(pl.Int64).alias("paywall_users"),
        )
        .cache()  # read twice: the rows and the spend shares
    )
    spent = (
        allocated_spend(installs.select(*FINE, "installs"), spend)
        .group_by(*FINE)
        .agg(_unless(pl.col("spend").is_null().any(), pl.col("spend").sum()).alias("spend"))
    )
    sums = [c for c in ACTION_SIGNAL_SCHEMA if c.startswith("net_rev_")]
    spent = spent.with_columns(pl.lit(True).alias("_spent"))
    activity = activity.with_columns(pl.lit(True).alias("_active"))
    nullable = [("spend", "_spent"), *[(c, "_active") for c in sums]]
    return (
        installs.join(spent, on=list(FINE), how="full", coalesce=True)
        .join(activity, on=list(FINE), how="full", coalesce=True)
        .with_columns(
            pl.col(*_COUNTS).fill_null(0),
            # A cell absent from one side has nothing there (zero); an unknown sum stays null.
            *[pl.when(pl.col(flag).is_null()).then(0.0).otherwise(pl.col(c)).alias(c) for c, flag in nullable],
            complete_days(pl.col("cohort_date"), observed_through).alias("complete_days"),
        )
        .select(list(ACTION_SIGNAL_SCHEMA))
        .cast(ACTION_SIGNAL_SCHEMA)
    )
