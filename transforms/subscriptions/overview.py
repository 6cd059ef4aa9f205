"""The live overview's stock figures from the ledger: active subscriptions and trials and MRR now
(`GET /v1/subscriptions/overview`; docs/metrics.md). Pure: the ledger's active purchases arrive
already grouped by what decides their MRR (price, currency, the price's day, billing period,
product; an unnamed period already resolved by the kept counts), so a workspace of 100 000
subscriptions is a few thousand rows here.

MRR is computed as the report computes it (`transforms.subscriptions.periods`): each
subscription's latest paid price converted at its day's ECB rate, times its billing period's
factor (the catalog's, else the store's, else its period's length to the nearest standard),
rounded to a millionth once, then summed: right after a refresh the two agree to the cent."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final

import polars as pl

from transforms.reports import money
from transforms.subscriptions.periods import CATALOG_SCHEMA, MICROS, monthly_factors

ACTIVE_GROUP_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "stock_key": pl.String(),
        "in_trial": pl.Boolean(),
        "price_amount": pl.Float64(),
        "price_currency": pl.String(),
        "priced_day": pl.Date(),
        "billing_period": pl.String(),
        "product_id": pl.String(),
        "subscriptions": pl.Int64(),
    }
)


@dataclass(frozen=True)
class Stocks:
    active_subscriptions: int
    active_trials: int
    mrr: float


def _rates_for(rates: pl.DataFrame, groups: pl.DataFrame, reporting: pl.DataFrame) -> pl.DataFrame:
    """The rates `money.convert` can use for these groups: their currencies (and the reporting
    one and the euro), from the oldest price day's look-back on; every later day kept, so the
    rates' last day (what `convert` clamps later days to) is the same. A few hundred rows
    instead of the whole history: the conversion then costs a millisecond, not thirty."""
    first = groups.get_column("priced_day").min()
    last = rates.get_column("rate_date").max()
    if not isinstance(first, date) or not isinstance(last, date):
        return rates
    wanted = {*groups.get_column("price_currency").drop_nulls().to_list()}
    wanted |= {*reporting.get_column("reporting_currency").to_list(), money.REFERENCE_CURRENCY}
    # `convert` looks a day up at the rates' last day when it is later (a stale rates file): keep
    # the look-back of whichever is earlier.
    since = min(first, last) - timedelta(days=money.MAX_RATE_AGE_DAYS)
    return rates.filter(pl.col("currency").is_in(wanted) & (pl.col("rate_date") >= since))


def monthly_values(
    groups: pl.DataFrame, *, catalog: pl.DataFrame, rates: pl.DataFrame, reporting: pl.DataFrame
) -> dict[str, int]:
    """Per paid group (`stock_key`), one subscription's MRR in millionths of the reporting
    currency; 0 for a price that cannot be converted or a period without a factor (as the report
    counts them). A pure function of the group's own fields, the catalog and the rates, so a
    caller may keep the answers while those stay the same."""
    paid = groups.cast(ACTIVE_GROUP_SCHEMA).filter(~pl.col("in_trial"))
    if paid.is_empty():
        return {}
    named = paid.join(
        catalog.cast(CATALOG_SCHEMA)
        .rename({"billing_period": "_catalog"})
        .unique(["workspace_id", "product_id"], keep="last"),
        on=["workspace_id", "product_id"],
        how="left",
    ).with_columns(pl.coalesce("_catalog", "billing_period").alias("_period"))
    rates = _rates_for(rates, named, reporting)
    converted = money.convert(
        named.lazy(),
        amount="price_amount",
        currency="price_currency",
        day="priced_day",
        rates=rates,
        reporting=reporting,
        out="_value",
        eur="_eur",
        reason="_unconvertible",
    ).collect()
    factors = monthly_factors(converted.get_column("_period").unique().to_list())
    usable = pl.col("_value").is_finite() & ~money.out_of_bounds(pl.col("_eur"))
    value = pl.when(usable).then(pl.col("_value")).otherwise(0.0).fill_null(0.0)
    factor = pl.col("_period").replace_strict(factors, default=None, return_dtype=pl.Float64).fill_null(0.0)
    micros = (value * factor * MICROS).round(0).cast(pl.Int64).alias("micros")
    return dict(converted.select("stock_key", micros).iter_rows())


def tally(counts: Iterable[tuple[str, bool, int]], values: Mapping[str, int]) -> Stocks:
    """Actives, trials and MRR from the kept counts (key, in trial, subscriptions) and each paid
    key's `monthly_values`. A paid key without a value is a caller's bug: KeyError."""
    actives = trials = micros = 0
    for key, in_trial, subscriptions in counts:
        if in_trial:
            trials += subscriptions
        else:
            actives += subscriptions
            micros += values[key] * subscriptions
    return Stocks(actives, trials, micros / MICROS)


def stocks(groups: pl.DataFrame, *, catalog: pl.DataFrame, rates: pl.DataFrame, reporting: pl.DataFrame) -> Stocks:
    """Actives, trials and MRR of one workspace's active purchases, grouped (`ACTIVE_GROUP_SCHEMA`)."""
    frame = groups.cast(ACTIVE_GROUP_SCHEMA)
    values = monthly_values(frame, catalog=catalog, rates=rates, reporting=reporting)
    return tally(frame.select("stock_key", "in_trial", "subscriptions").iter_rows(), values)
