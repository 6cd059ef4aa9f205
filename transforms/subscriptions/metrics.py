"""Subscription metrics by day: actives, trials, MRR, the flows between them, and revenue
(definitions: docs/metrics.md).

Every figure comes from *movements*: a paid segment's start (+1 active, new or a reactivation),
its end (-1 active, a lapse), a trial's start and end, and MRR's steps at each period's start and
a segment's end. A day's stock is the running sum of the movements up to its end, so the identity
"today's actives = yesterday's + new - churned + reactivated" holds by construction and the asset
check verifies the sums, not a second model.

Churn and reactivation depend on the period asked for: a lapse followed by the user's return
within the same period is neither (a renewal a day late is churn and a reactivation by day, and
neither by week). Each lapse is therefore stored with the time of the return that heals it (if
any), and each return with the lapse it heals, so a week or a month is counted exactly from the
rows, not from summed days (`subscription_movements`).

A reactivation is a paid segment starting for a user who had one before and holds none at that
moment; it heals that user's latest lapse. A lapsed purchase starting again while the user holds
another one counts as a reactivation too, healing nothing (it is not new: the purchase was paid
before). A subscription's product, store and app (its group) are those of its purchase's latest
period; a user's country and campaign are those of their first install (the payback cohorts).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Final, Literal, NamedTuple

import polars as pl
import polars.selectors as cs

from transforms import event_types as t
from transforms.subscriptions.periods import CHARGE_TYPES, GRANT_SCHEMA, MICROS, PERIOD_TYPES, store_name

GROUP_COLUMNS: Final = ("store", "product_id", "app_id", "country", "campaign")
_PURCHASE: Final = ["workspace_id", "store", "purchase_key"]
_US = pl.Datetime("us", "UTC")

MOVEMENT_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "store": pl.String(),
        "purchase_key": pl.String(),
        "at": _US,
        "d_active": pl.Int64(),
        "d_trial": pl.Int64(),
        "d_mrr": pl.Int64(),  # millionths of the reporting currency
        "new_subscriptions": pl.Int64(),
        "new_trials": pl.Int64(),
        "trial_conversions": pl.Int64(),
        "reactivations": pl.Int64(),
        "lapses": pl.Int64(),
        # A lapse: the return that heals it; a reactivation: the lapse it heals (else null).
        "pair_at": _US,
        "pair_store": pl.String(),
        "pair_purchase_key": pl.String(),
    }
)

DAILY_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "date": pl.Date(),
        **{c: pl.String() for c in GROUP_COLUMNS},
        "active_subscriptions": pl.Int64(),
        "active_trials": pl.Int64(),
        "mrr": pl.Float64(),
        "new_subscriptions": pl.Int64(),
        "new_trials": pl.Int64(),
        "trial_conversions": pl.Int64(),
        "reactivations": pl.Int64(),
        "churned_subscriptions": pl.Int64(),
        "new_customers": pl.Int64(),
        "paid_transactions": pl.Int64(),
        "refunds": pl.Int64(),
        "gross_revenue": pl.Float64(),
        "refunded_revenue": pl.Float64(),
        "net_revenue": pl.Float64(),
    }
)

PAIRED_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "date": pl.Date(),
        **{c: pl.String() for c in GROUP_COLUMNS},
        "movement": pl.String(),  # churn | reactivation
        "pair_date": pl.Date(),
        "pair_store": pl.String(),
        "pair_product_id": pl.String(),
        "pair_app_id": pl.String(),
        "count": pl.Int64(),
    }
)

_ZERO_MOVES = {
    name: pl.lit(0, pl.Int64)
    for name in (
        "d_active",
        "d_trial",
        "d_mrr",
        "new_subscriptions",
        "new_trials",
        "trial_conversions",
        "reactivations",
        "lapses",
    )
}
_NO_PAIR = {
    "pair_at": pl.lit(None, _US),
    "pair_store": pl.lit(None, pl.String),
    "pair_purchase_key": pl.lit(None, pl.String),
}


def _moves(frame: pl.DataFrame, at: str, **values: pl.Expr) -> pl.DataFrame:
    exprs = {**_ZERO_MOVES, **_NO_PAIR, **values}
    return frame.select("workspace_id", "user_id", "store", "purchase_key", pl.col(at).alias("at"), **exprs).cast(
        MOVEMENT_SCHEMA
    )


def movements(periods: pl.DataFrame, as_of: datetime) -> pl.DataFrame:
    """Every movement up to `as_of` (later ones, and ends still to come, have not happened)."""
    paid = periods.filter(pl.col("paid")).sort([*_PURCHASE, "started_at", "event_id"])
    segment = [*_PURCHASE, "segment"]
    # MRR steps at each paid period's start (from the previous period's price in its segment).
    steps = paid.with_columns(
        (pl.col("mrr_micros") - pl.col("mrr_micros").shift(1).over(segment).fill_null(0)).alias("_d")
    )
    segments = (
        paid.group_by(segment, maintain_order=True)
        .agg(
            pl.col("user_id").first(),
            pl.col("started_at").min().alias("seg_start"),
            pl.col("ends_at").max().alias("seg_end"),
            pl.col("mrr_micros").last().alias("last_mrr"),
            (pl.col("event_type").first() == t.TRIAL_CONVERTED).alias("converted"),
        )
        .sort("workspace_id", "user_id", "seg_start", "store", "purchase_key")
    )
    reached = pl.col("seg_end").cum_max().shift(1).over("workspace_id", "user_id")
    segments = segments.with_columns(reached.alias("_reached"))
    lapsed_before = pl.col("_reached").is_not_null() & (pl.col("_reached") <= pl.col("seg_start"))
    is_new = pl.col("_reached").is_null() | (~lapsed_before & (pl.col("segment") == 1))
    segments = segments.with_columns(
        is_new.alias("_new"), pl.when(lapsed_before).then(pl.col("_reached")).alias("_heals")
    )
    # Which segment's lapse each return heals: the user's (first) segment that ended at `_heals`.
    ended = segments.select(
        "workspace_id", "user_id", pl.col("seg_end").alias("_heals"), "store", "purchase_key"
    ).unique(["workspace_id", "user_id", "_heals"], keep="first", maintain_order=True)
    returns = segments.filter(pl.col("_heals").is_not_null()).join(
        ended.rename({"store": "pair_store", "purchase_key": "pair_purchase_key"}),
        on=["workspace_id", "user_id", "_heals"],
        how="left",
    )
    healed = returns.select(
        "workspace_id",
        "user_id",
        pl.col("pair_store").alias("store"),
        pl.col("pair_purchase_key").alias("purchase_key"),
        pl.col("_heals").alias("seg_end"),
        pl.col("seg_start").alias("pair_at"),
        pl.col("store").alias("pair_store"),
        pl.col("purchase_key").alias("pair_purchase_key"),
    )
    lapses = segments.filter(pl.col("seg_end") <= as_of).join(
        healed, on=["workspace_id", "user_id", "store", "purchase_key", "seg_end"], how="left"
    )
    trials = periods.filter(~pl.col("paid")).sort("started_at")
    first_paid = paid.select(*_PURCHASE, pl.col("started_at").alias("_paid_at")).sort("_paid_at")
    trials = trials.join_asof(
        first_paid, left_on="started_at", right_on="_paid_at", by=_PURCHASE, strategy="forward", check_sortedness=False
    ).with_columns(pl.min_horizontal("ends_at", "_paid_at").alias("_trial_end"))
    one = pl.lit(1, pl.Int64)
    frames = [
        _moves(steps, "started_at", d_mrr=pl.col("_d")),
        _moves(
            segments,
            "seg_start",
            d_active=one,
            new_subscriptions=pl.col("_new").cast(pl.Int64),
            reactivations=(~pl.col("_new")).cast(pl.Int64),
            trial_conversions=pl.col("converted").cast(pl.Int64),
            pair_at=pl.col("_heals"),
        ),
        _moves(lapses, "seg_end", d_active=-one, d_mrr=-pl.col("last_mrr"), lapses=one, **_LAPSE_PAIR),
        _moves(trials, "started_at", d_trial=one, new_trials=one),
        _moves(trials, "_trial_end", d_trial=-one),
    ]
    # A reactivation's pair: the segment whose lapse it heals.
    frame = pl.concat(frames)
    heals = returns.select(
        "workspace_id",
        "user_id",
        "store",
        "purchase_key",
        pl.col("seg_start").alias("at"),
        pl.col("pair_store").alias("_ps"),
        pl.col("pair_purchase_key").alias("_pk"),
    )
    frame = frame.join(heals, on=["workspace_id", "user_id", "store", "purchase_key", "at"], how="left")
    is_return = pl.col("reactivations") > 0
    frame = frame.with_columns(
        pl.when(is_return).then(pl.col("_ps")).otherwise(pl.col("pair_store")).alias("pair_store"),
        pl.when(is_return).then(pl.col("_pk")).otherwise(pl.col("pair_purchase_key")).alias("pair_purchase_key"),
    ).drop("_ps", "_pk")
    return frame.filter(pl.col("at") <= as_of).cast(MOVEMENT_SCHEMA)


# A lapse's pair: the return that healed it (joined onto the lapses as these columns).
_LAPSE_PAIR: Final = {name: pl.col(name) for name in ("pair_at", "pair_store", "pair_purchase_key")}


def purchase_groups(periods: pl.DataFrame, grants: pl.DataFrame) -> pl.DataFrame:
    """Each purchase's product (its latest period's), store and app (the ledger's; null where the
    ledger does not know the purchase, e.g. demo data)."""
    latest = periods.sort("started_at").group_by(_PURCHASE).agg(pl.col("product_id").last())
    apps = (
        grants.cast(GRANT_SCHEMA)
        .select(
            "workspace_id",
            store_name(pl.col("source")).alias("store"),
            pl.col("store_key").alias("purchase_key"),
            "app_id",
        )
        .unique(_PURCHASE)
    )
    return latest.join(apps, on=_PURCHASE, how="left")


def _with_groups(frame: pl.DataFrame, groups: pl.DataFrame, users: pl.DataFrame) -> pl.DataFrame:
    return frame.join(groups, on=_PURCHASE, how="left").join(
        users.select("workspace_id", "user_id", "country", "campaign"), on=["workspace_id", "user_id"], how="left"
    )


def transactions(billing: pl.DataFrame) -> pl.DataFrame:
    """Paid transactions, refunds and new customers, each refund booked on its transaction's day: the charge it
    names by `transaction_id`, else the purchase's latest charge at or before the refund (a
    refund whose charge the lake does not hold is booked on its own day). Columns: the purchase,
    `date`, `charges` (0/1), `gross`, `refunded_transactions` (0/1: a charge refunded twice
    counts once), `refunded`, `new_customers` (1 on a user's first billing fact, under its
    purchase's group)."""
    charges = billing.filter(pl.col("event_type").is_in(CHARGE_TYPES) & (pl.col("amount") > 0))
    refunds = billing.filter(pl.col("event_type") == t.REFUND).sort("occurred_at")
    by_id = (
        charges.filter(pl.col("transaction_id").is_not_null())
        .select(*_PURCHASE, "transaction_id", pl.col("event_id").alias("_by_id"), pl.col("occurred_at").alias("_id_at"))
        .unique([*_PURCHASE, "transaction_id"])
    )
    latest = charges.select(*_PURCHASE, pl.col("event_id").alias("_asof"), pl.col("occurred_at").alias("_asof_at"))
    matched = (
        refunds.join(by_id, on=[*_PURCHASE, "transaction_id"], how="left")
        .join_asof(
            latest.sort("_asof_at"), left_on="occurred_at", right_on="_asof_at", by=_PURCHASE, check_sortedness=False
        )
        .with_columns(
            pl.coalesce("_by_id", "_asof", "event_id").alias("_charge"),
            pl.coalesce("_id_at", "_asof_at", "occurred_at").alias("_booked"),
        )
    )
    refund_rows = matched.group_by([*_PURCHASE, "user_id", "_charge", "_booked"]).agg(
        pl.col("amount").sum().alias("refunded")
    )
    # A new customer: a user's first billing fact (a trial, a paid period or a one-off purchase).
    firsts = (
        billing.filter(pl.col("event_type").is_in((*PERIOD_TYPES, t.PURCHASE)))
        .sort("occurred_at", "event_id")
        .unique(["workspace_id", "user_id"], keep="first", maintain_order=True)
    )
    zero, none = pl.lit(0, pl.Int64), pl.lit(0.0)
    return pl.concat(
        [
            charges.select(
                *_PURCHASE,
                "user_id",
                pl.col("occurred_at").dt.date().alias("date"),
                pl.lit(1, pl.Int64).alias("charges"),
                pl.col("amount").alias("gross"),
                zero.alias("refunded_transactions"),
                none.alias("refunded"),
                zero.alias("new_customers"),
            ),
            refund_rows.select(
                *_PURCHASE,
                "user_id",
                pl.col("_booked").dt.date().alias("date"),
                zero.alias("charges"),
                none.alias("gross"),
                pl.lit(1, pl.Int64).alias("refunded_transactions"),
                "refunded",
                zero.alias("new_customers"),
            ),
            firsts.select(
                *_PURCHASE,
                "user_id",
                pl.col("occurred_at").dt.date().alias("date"),
                zero.alias("charges"),
                none.alias("gross"),
                zero.alias("refunded_transactions"),
                none.alias("refunded"),
                pl.lit(1, pl.Int64).alias("new_customers"),
            ),
        ]
    )


def _same_group(prefix: str, columns: tuple[str, ...]) -> pl.Expr:
    """Whether the pair is in the row's own group (null pairs never are)."""
    same = pl.lit(True)
    for c in columns:
        same = same & pl.col(c).eq_missing(pl.col(f"{prefix}{c}"))
    return same


def daily(
    movements_: pl.DataFrame,
    transactions_: pl.DataFrame,
    groups: pl.DataFrame,
    users: pl.DataFrame,
    last_day: date,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The `subscription_metrics` rows (one per workspace, day and group, from the group's first
    movement to `last_day`, leaving out days where every figure is 0) and the
    `subscription_movements` rows (lapses and returns with their pair, for periods longer than a
    day). A day's churned and reactivated counts cancel a lapse and a return of the same day
    within the row's group."""
    moves = _with_groups(movements_, groups, users).with_columns(pl.col("at").dt.date().alias("date"))
    pair_groups = groups.rename(
        {
            "store": "pair_store",
            "purchase_key": "pair_purchase_key",
            "product_id": "pair_product_id",
            "app_id": "pair_app_id",
        }
    )
    moves = moves.join(pair_groups, on=["workspace_id", "pair_store", "pair_purchase_key"], how="left").with_columns(
        pl.col("pair_at").dt.date().alias("pair_date")
    )
    own = ("store", "product_id", "app_id")
    cancelled = (pl.col("pair_date") == pl.col("date")) & _same_group("pair_", own)
    moves = moves.with_columns(
        pl.when(cancelled).then(0).otherwise(pl.col("lapses")).alias("churned_subscriptions"),
        pl.when(cancelled).then(0).otherwise(pl.col("reactivations")).alias("_reactivations"),
    )
    keys = ["workspace_id", *GROUP_COLUMNS]
    flows = moves.group_by([*keys, "date"]).agg(
        pl.col("d_active").sum(),
        pl.col("d_trial").sum(),
        pl.col("d_mrr").sum(),
        pl.col("new_subscriptions").sum(),
        pl.col("new_trials").sum(),
        pl.col("trial_conversions").sum(),
        pl.col("_reactivations").sum().alias("reactivations"),
        pl.col("churned_subscriptions").sum(),
    )
    money = (
        _with_groups(transactions_, groups, users)
        .group_by([*keys, "date"])
        .agg(
            pl.col("charges").sum().alias("paid_transactions"),
            pl.col("refunded_transactions").sum().alias("refunds"),
            pl.col("gross").sum().alias("gross_revenue"),
            pl.col("refunded").sum().alias("refunded_revenue"),
            pl.col("new_customers").sum(),
        )
    )
    both = flows.join(money, on=[*keys, "date"], how="full", coalesce=True, nulls_equal=True).filter(
        pl.col("date") <= last_day
    )
    spans = both.group_by(keys).agg(pl.col("date").min().alias("_first"))
    grid = spans.with_columns(pl.date_ranges("_first", pl.lit(last_day)).alias("date")).explode("date").drop("_first")
    filled = (
        grid.join(both, on=[*keys, "date"], how="left", nulls_equal=True)
        .with_columns(cs.numeric().fill_null(0))
        .sort([*keys, "date"])
    )
    stocks = filled.with_columns(
        pl.col("d_active").cum_sum().over(keys).alias("active_subscriptions"),
        pl.col("d_trial").cum_sum().over(keys).alias("active_trials"),
        (pl.col("d_mrr").cum_sum().over(keys) / MICROS).alias("mrr"),
        (pl.col("gross_revenue") - pl.col("refunded_revenue")).alias("net_revenue"),
    )
    measures = [c for c in DAILY_SCHEMA if c not in ("workspace_id", "date", *GROUP_COLUMNS)]
    nonzero = pl.any_horizontal(pl.col(c) != 0 for c in measures)
    metrics = stocks.filter(nonzero).select(list(DAILY_SCHEMA)).cast(DAILY_SCHEMA)
    paired = (
        moves.filter((pl.col("lapses") > 0) | (pl.col("reactivations") > 0))
        .with_columns(
            pl.when(pl.col("lapses") > 0).then(pl.lit("churn")).otherwise(pl.lit("reactivation")).alias("movement")
        )
        .group_by([*keys, "date", "movement", "pair_date", "pair_store", "pair_product_id", "pair_app_id"])
        .agg(pl.len().cast(pl.Int64).alias("count"))
        .select(list(PAIRED_SCHEMA))
        .cast(PAIRED_SCHEMA)
        .sort("workspace_id", "date")
    )
    return metrics.sort("workspace_id", "date", *GROUP_COLUMNS), paired


Interval = Literal["day", "week", "month"]
GroupBy = Literal["none", "store", "product", "country", "campaign", "app"]
GROUP_BY_COLUMN: Final[dict[str, str | None]] = {
    "none": None,
    "store": "store",
    "product": "product_id",
    "country": "country",
    "campaign": "campaign",
    "app": "app_id",
}
REPORT_COLUMNS: Final = (
    "period_start",
    "group",
    "active_subscriptions",
    "active_trials",
    "mrr",
    "arr",
    "new_subscriptions",
    "new_trials",
    "trial_conversions",
    "reactivations",
    "churned_subscriptions",
    "churn_rate",
    "refunds",
    "refund_rate",
    "gross_revenue",
    "net_revenue",
)


def period_start(day: pl.Expr, interval: Interval) -> pl.Expr:
    if interval == "week":
        return day - pl.duration(days=day.dt.weekday() - 1)
    if interval == "month":
        return day.dt.month_start()
    return day


def report(
    metrics: pl.DataFrame,
    paired: pl.DataFrame,
    *,
    start: date,
    end: date,
    interval: Interval,
    group_by: GroupBy,
) -> pl.DataFrame:
    """The report's rows: per period (`period_start`: the day, the week's Monday, the month's
    first) and group, stocks at the period's last day within the range, flows of its days within
    the range, churn and reactivations counted with the period's own pairs. `metrics` holds one
    workspace's daily rows from the day before `start` on; `paired` its movement rows."""
    column = GROUP_BY_COLUMN[group_by]
    group = pl.col(column) if column else pl.lit(None, pl.String)
    days = metrics.with_columns(group.alias("group"), period_start(pl.col("date"), interval).alias("period_start"))
    in_range = days.filter(pl.col("date").is_between(start, end))
    stocks = days.group_by("group", "date").agg(
        pl.col("active_subscriptions").sum(), pl.col("active_trials").sum(), pl.col("mrr").sum()
    )
    # Every period of the range, with the range's first and last day in it.
    calendar = (
        pl.DataFrame({"date": pl.date_range(start, end, eager=True)})
        .with_columns(period_start(pl.col("date"), interval).alias("period_start"))
        .group_by("period_start")
        .agg(pl.col("date").min().alias("_first"), pl.col("date").max().alias("_last"))
    )
    groups = (
        in_range.select("group").unique() if column else pl.DataFrame({"group": [None]}, schema={"group": pl.String})
    )
    # A period's stock is its last day's; a group without a row that day holds nothing then.
    before = stocks.select(
        "group",
        (pl.col("date") + timedelta(days=1)).alias("_first"),
        pl.col("active_subscriptions").alias("_start_actives"),
    )
    summed = ("new_subscriptions", "new_trials", "trial_conversions", "paid_transactions", "refunds")
    flows = in_range.group_by("period_start", "group").agg(
        *(pl.col(c).sum() for c in (*summed, "gross_revenue", "net_revenue"))
    )
    churn = _paired_counts(paired, column, interval, start, end)
    rows = (
        calendar.join(groups, how="cross")
        .join(stocks, left_on=["group", "_last"], right_on=["group", "date"], how="left", nulls_equal=True)
        .join(before, on=["group", "_first"], how="left", nulls_equal=True)
        .join(flows, on=["period_start", "group"], how="left", nulls_equal=True)
        .join(churn, on=["period_start", "group"], how="left", nulls_equal=True)
        .with_columns(cs.numeric().fill_null(0))
    )
    rate = lambda num, den: pl.when(pl.col(den) > 0).then(pl.col(num) / pl.col(den))  # noqa: E731
    return rows.select(
        "period_start",
        "group",
        "active_subscriptions",
        "active_trials",
        pl.col("mrr").round(6),
        (pl.col("mrr") * 12).round(6).alias("arr"),
        "new_subscriptions",
        "new_trials",
        "trial_conversions",
        "reactivations",
        "churned_subscriptions",
        rate("churned_subscriptions", "_start_actives").alias("churn_rate"),
        "refunds",
        rate("refunds", "paid_transactions").alias("refund_rate"),
        pl.col("gross_revenue").round(6),
        pl.col("net_revenue").round(6),
    ).sort("period_start", "group", nulls_last=True)


def _paired_counts(
    paired: pl.DataFrame, column: str | None, interval: Interval, start: date, end: date
) -> pl.DataFrame:
    """Churned and reactivated per period and group: a lapse and the return that heals it cancel
    when both fall in the same period (and, grouped, in the same group)."""
    group = pl.col(column) if column else pl.lit(None, pl.String)
    pair_column = {"store": "pair_store", "product_id": "pair_product_id", "app_id": "pair_app_id"}.get(column or "")
    same_group = pl.col(column).eq_missing(pl.col(pair_column)) if column and pair_column else pl.lit(True)
    rows = paired.filter(pl.col("date").is_between(start, end)).with_columns(
        group.alias("group"), period_start(pl.col("date"), interval).alias("period_start")
    )
    pair_in_period = (
        pl.col("pair_date").is_between(start, end)
        & (period_start(pl.col("pair_date"), interval) == pl.col("period_start"))
        & same_group
    ).fill_null(False)
    counted = rows.filter(~pair_in_period)
    return counted.group_by("period_start", "group").agg(
        pl.col("count").filter(pl.col("movement") == "churn").sum().alias("churned_subscriptions"),
        pl.col("count").filter(pl.col("movement") == "reactivation").sum().alias("reactivations"),
    )


class Computed(NamedTuple):
    daily: pl.DataFrame  # `subscription_metrics` (DAILY_SCHEMA)
    paired: pl.DataFrame  # `subscription_movements` (PAIRED_SCHEMA)
    billing: pl.DataFrame  # the billing facts read (periods.BILLING_SCHEMA), for the purchases table


def compute(
    events: pl.LazyFrame,
    *,
    grants: pl.DataFrame,
    catalog: pl.DataFrame,
    users: pl.DataFrame,
    rates: pl.DataFrame,
    reporting: pl.DataFrame,
    as_of: datetime,
) -> Computed:
    """`subscription_metrics` and `subscription_movements` from the canonical events, the ledger's
    grants, the apps' catalogs (published paywall offers' billing periods), the users' cohorts
    (country, campaign) and the ECB rates, as of `as_of` (the last day is the unfinished one)."""
    from transforms.subscriptions.periods import billing_events, periods

    billing = billing_events(events, rates, reporting).filter(pl.col("occurred_at") <= as_of).collect()
    found = periods(billing, grants, catalog)
    groups = purchase_groups(found, grants)
    daily_, paired = daily(movements(found, as_of), transactions(billing), groups, users, as_of.date())
    return Computed(daily_, paired, billing)
