"""From canonical events and the ledger to each purchase's periods: when it granted paid access
or a free trial, at what price per month (docs/metrics.md, issue 34).

Only events a store or provider stated about a purchase count: they carry `purchase_key` (the
ledger's `store_key`) and, for a period, `period_ends_at`. Subscription events an attribution
vendor relays (an MMP's `subscription_start` without a purchase) are signals for payback, not
billing facts, and would count a subscription twice.

The lake says when each period began and was due to end; the ledger's latest statement about
the purchase says how its latest period really ends: a grace period extends it to the grace's
end, an early expiry (an upgrade's old product, a billing retry given up) shortens it, a refund
that revokes access ends it at the revocation. Periods of one purchase that touch or overlap
(a renewal, an upgrade bought mid-period) form one paid *segment*: a gap between them, even a
day's billing retry, is a lapse and a return.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

import polars as pl

from transforms import event_types as t
from transforms.reports import money
from transforms.reports.lifecycle import with_properties
from transforms.subscriptions.billing import BillingPeriodError, nearest_standard, parse_billing_period

PERIOD_TYPES: Final = (t.TRIAL_START, t.SUBSCRIPTION_START, t.TRIAL_CONVERTED, t.RENEWAL)
CHARGE_TYPES: Final = (t.SUBSCRIPTION_START, t.TRIAL_CONVERTED, t.RENEWAL, t.PURCHASE)
BILLING_TYPES: Final = (*PERIOD_TYPES, t.PURCHASE, t.REFUND)
# The store a purchase was made in, as reports name it: the source's kind, `generic` for FloKit's
# own format. Demo data keeps its `demo` source so it never passes for a store's.
STORE_NAMES: Final = {"generic-subscription": "generic"}
# MRR is summed in millionths of the reporting currency: each subscription's monthly value is
# rounded once, so that a day's MRR is an exact sum whatever order it is added in.
MICROS: Final = 1_000_000

BILLING_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "store": pl.String(),
        "purchase_key": pl.String(),
        "event_id": pl.String(),
        "event_type": pl.String(),
        "occurred_at": pl.Datetime("us", "UTC"),
        "product_id": pl.String(),
        "transaction_id": pl.String(),
        "ends_at": pl.Datetime("us", "UTC"),
        "billing_period": pl.String(),
        "amount": pl.Float64(),  # in the reporting currency, >= 0 (a refund's amount refunded)
    }
)

GRANT_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "app_id": pl.String(),
        "source": pl.String(),
        "store_key": pl.String(),
        "kind": pl.String(),
        "expires_at": pl.Datetime("us", "UTC"),
        "grace_ends_at": pl.Datetime("us", "UTC"),
        "revoked_at": pl.Datetime("us", "UTC"),
    }
)

CATALOG_SCHEMA: Final = pl.Schema(
    {"workspace_id": pl.String(), "product_id": pl.String(), "billing_period": pl.String()}
)


def store_name(source: pl.Expr) -> pl.Expr:
    return source.replace(STORE_NAMES)


def billing_events(events: pl.LazyFrame, rates: pl.DataFrame, reporting: pl.DataFrame) -> pl.LazyFrame:
    """The billing facts among canonical events, their properties parsed and amounts in the
    workspace's reporting currency at the ECB rate of the event's day (as payback converts them).
    An amount that cannot be converted or is not a finite, non-negative charge counts as 0."""
    relevant = events.filter(pl.col("event_type").is_in(BILLING_TYPES) & pl.col("user_id").is_not_null())
    parsed = with_properties(
        relevant,
        ("purchase_key", "product_id", "offer", "transaction_id", "period_ends_at", "billing_period", "currency"),
        ("revenue",),
    ).filter(pl.col("prop_purchase_key").is_not_null())
    staged = parsed.select(
        "workspace_id",
        "user_id",
        store_name(pl.col("source")).alias("store"),
        pl.col("prop_purchase_key").alias("purchase_key"),
        "event_id",
        "event_type",
        "occurred_at",
        pl.col("occurred_at").dt.date().alias("_day"),
        pl.coalesce("prop_product_id", "prop_offer").alias("product_id"),
        pl.col("prop_transaction_id").alias("transaction_id"),
        pl.col("prop_period_ends_at")
        .str.to_datetime(time_zone="UTC", strict=False)
        .dt.cast_time_unit("us")
        .alias("ends_at"),
        pl.col("prop_billing_period").alias("billing_period"),
        pl.col("prop_revenue").cast(pl.Float64, strict=False).abs().alias("_amount"),
        pl.col("prop_currency").str.to_uppercase().alias("_currency"),
    )
    converted = money.convert(
        staged,
        amount="_amount",
        currency="_currency",
        day="_day",
        rates=rates,
        reporting=reporting,
        out="_value",
        eur="_eur",
        reason="_unconvertible",
    )
    usable = pl.col("_value").is_finite() & ~money.out_of_bounds(pl.col("_eur"))
    return (
        converted.with_columns(pl.when(usable).then(pl.col("_value")).otherwise(0.0).fill_null(0.0).alias("amount"))
        .select(list(BILLING_SCHEMA))
        .cast(BILLING_SCHEMA)
    )


def monthly_factors(periods: list[str | None]) -> dict[str, float]:
    """Each named billing period's MRR factor (an unreadable name is left out: the period's own
    length decides it then)."""
    factors: dict[str, float] = {}
    for name in periods:
        if name is None:
            continue
        try:
            factors[name] = float(parse_billing_period(name).monthly_factor)
        except BillingPeriodError:
            continue
    return factors


def _nearest_factor(days: float) -> float:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return float(nearest_standard(start, start + timedelta(days=days)).monthly_factor)


def factor_by_length(lengths: pl.Series) -> pl.Series:
    """The MRR factor of each paid period from its own length, nearest standard period; the table
    of distinct lengths is tiny, so it is looked up rather than computed per row."""
    distinct = [d for d in lengths.unique().to_list() if d is not None and d > 0]
    table = {d: _nearest_factor(d) for d in distinct}
    return lengths.replace_strict(table, default=None, return_dtype=pl.Float64)


def periods(billing: pl.DataFrame, grants: pl.DataFrame, catalog: pl.DataFrame) -> pl.DataFrame:
    """Each period of each purchase: `started_at`, `ends_at` (the ledger's statement applied to
    the latest), `paid`, `mrr_micros` (its price per month, in millionths of the reporting
    currency; a paid period whose event named no price keeps the purchase's previous one),
    `segment` (1, 2, ... per purchase and paid or trial: periods that touch or overlap share
    one) and `product_id`, `event_type`."""
    rows = billing.filter(pl.col("event_type").is_in(PERIOD_TYPES) & pl.col("ends_at").is_not_null())
    keys = ["workspace_id", "store", "purchase_key"]
    ledger = grants.cast(GRANT_SCHEMA).select(
        "workspace_id",
        store_name(pl.col("source")).alias("store"),
        pl.col("store_key").alias("purchase_key"),
        pl.max_horizontal("expires_at", "grace_ends_at").alias("_access_ends"),
        "expires_at",
        "revoked_at",
    )
    latest = pl.col("occurred_at") == pl.col("occurred_at").max().over(keys)
    stated = latest & pl.col("expires_at").is_not_null() & (pl.col("expires_at") >= pl.col("occurred_at"))
    ends = pl.when(stated).then(pl.col("_access_ends")).otherwise(pl.col("ends_at"))
    revoked = latest & pl.col("revoked_at").is_not_null()
    ends = pl.when(revoked).then(pl.min_horizontal(ends, pl.col("revoked_at"))).otherwise(ends)
    applied = (
        rows.join(ledger.unique(keys), on=keys, how="left")
        .with_columns(
            pl.col("ends_at").alias("_stated_ends"),
            ends.alias("ends_at"),
            (pl.col("event_type") != t.TRIAL_START).alias("paid"),
        )
        .filter(pl.col("ends_at") > pl.col("occurred_at"))
        .rename({"occurred_at": "started_at"})
    )
    named = pl.coalesce(pl.col("billing_period_catalog"), pl.col("billing_period"))  # the catalog first, then the store
    with_catalog = applied.join(
        catalog.cast(CATALOG_SCHEMA)
        .rename({"billing_period": "billing_period_catalog"})
        .unique(["workspace_id", "product_id"], keep="last"),
        on=["workspace_id", "product_id"],
        how="left",
    ).with_columns(named.alias("billing_period"))
    factors = monthly_factors(with_catalog.get_column("billing_period").unique().to_list())
    # The period's length as the store stated it (a grace period or an early end is not a plan).
    length_days = (pl.col("_stated_ends") - pl.col("started_at")).dt.total_microseconds() / 86_400e6
    priced = with_catalog.with_columns(
        pl.col("billing_period").replace_strict(factors, default=None, return_dtype=pl.Float64).alias("_named"),
        length_days.round(3).alias("_days"),
    )
    priced = priced.with_columns(
        pl.coalesce("_named", pl.Series("_by_length", factor_by_length(priced.get_column("_days")))).alias("_factor")
    )
    # A paid period without a stated price (a renewal event whose amount was not given) keeps
    # the purchase's previous price: what the subscriber still pays.
    price = pl.when(pl.col("paid") & (pl.col("amount") > 0)).then(pl.col("amount"))
    ordered = priced.sort([*keys, "started_at", "event_id"]).with_columns(
        price.forward_fill().over(keys).fill_null(0.0).alias("_price")
    )
    mrr = pl.when(pl.col("paid")).then((pl.col("_price") * pl.col("_factor") * MICROS).round(0)).otherwise(0)
    # Segments: a period that starts after every earlier one of the purchase (of its kind) ended.
    group = [*keys, "paid"]
    reached = pl.col("ends_at").cum_max().shift(1).over(group)
    starts_segment = reached.is_null() | (pl.col("started_at") > reached)
    return ordered.with_columns(
        mrr.cast(pl.Int64).alias("mrr_micros"),
        starts_segment.cast(pl.Int32).cum_sum().over(group).alias("segment"),
    ).select(
        "workspace_id",
        "user_id",
        "store",
        "purchase_key",
        "event_id",
        "event_type",
        "product_id",
        "started_at",
        "ends_at",
        "paid",
        "billing_period",
        "mrr_micros",
        "segment",
    )


PURCHASE_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "app_id": pl.String(),
        "store": pl.String(),
        "purchase_key": pl.String(),
        "user_id": pl.String(),
        "product_id": pl.String(),
        "kind": pl.String(),
        "environment": pl.String(),
        "status": pl.String(),
        "started_at": pl.Datetime("us", "UTC"),
        "expires_at": pl.Datetime("us", "UTC"),
        "grace_ends_at": pl.Datetime("us", "UTC"),
        "in_trial": pl.Boolean(),
        "will_renew": pl.Boolean(),
        "refunded": pl.Boolean(),
        "refunded_at": pl.Datetime("us", "UTC"),
        "price_amount": pl.Float64(),
        "price_currency": pl.String(),
        "billing_period": pl.String(),
        "stated_at": pl.Datetime("us", "UTC"),
    }
)


def purchases(ledger: pl.DataFrame, billing: pl.DataFrame) -> pl.DataFrame:
    """One row per purchase with its latest state (the ledger's, `status` decided as the customer
    page decides it) and when it started: its first billing event in the lake, else when the
    ledger first heard of it. `ledger` has the grants' columns and `status`, `recorded_at`."""
    first = billing.group_by("workspace_id", "store", "purchase_key").agg(pl.col("occurred_at").min().alias("_first"))
    return (
        ledger.with_columns(store_name(pl.col("source")).alias("store"), pl.col("store_key").alias("purchase_key"))
        .join(first, on=["workspace_id", "store", "purchase_key"], how="left")
        .with_columns(
            pl.coalesce("_first", "recorded_at").alias("started_at"),
            pl.col("revoked_at").is_not_null().alias("refunded"),
            pl.col("revoked_at").alias("refunded_at"),
            ((pl.col("auto_renew") == True) & (pl.col("kind") == "subscription")).alias("will_renew"),  # noqa: E712
        )
        .select(list(PURCHASE_SCHEMA))
        .cast(PURCHASE_SCHEMA)
        .sort("workspace_id", "started_at")
    )
