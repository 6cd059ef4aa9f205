"""Amounts in each workspace's reporting currency, at the ECB reference rate of their UTC day.

The rates are the ECB's daily euro foreign exchange reference rates (`warehouse.fx` reads them:
1 EUR = `per_eur` units of the currency). A currency converts to another through the euro on the
same day: `amount / per_eur(from) * per_eur(to)`. The ECB publishes on TARGET working days only,
so a weekend or holiday takes the latest earlier rate, and so does every day after the rates
file ends (until `flokit fx refresh` brings newer ones). That latest earlier rate is used only
while it is at most `MAX_RATE_AGE_DAYS` old: the ECB's longest closures (Good Friday to Easter
Monday, Christmas) leave at most 4 days without a rate in its whole history, while a currency
it stopped quoting (RUB since 2022-03-02, ISK from December 2008 to February 2018, BGN and the
other currencies the euro replaced) must not be converted at a months- or years-old rate. A day
before a currency's first rate is unconvertible. Same currency as the reporting one: rate 1.

An amount that cannot be converted keeps a null converted value and says why, so the blocking
asset checks can name the currency and the day instead of the reports summing a wrong number.
"""

from __future__ import annotations

from datetime import date
from typing import Final, Literal

import polars as pl

from transforms.ingest.validation import CURRENCIES, MAX_EVENT_AMOUNT_EUR, REFERENCE_CURRENCY

RATE_SCHEMA: Final = pl.Schema({"rate_date": pl.Date(), "currency": pl.String(), "per_eur": pl.Float64()})
REPORTING_SCHEMA: Final = pl.Schema({"workspace_id": pl.String(), "reporting_currency": pl.String()})
MAX_RATE_AGE_DAYS: Final = 7

# Why an amount has no converted value (`unconvertible`), or is left out of revenue (`excluded`).
Unconvertible = Literal["unknown_currency", "currency_without_rate", "no_reporting_currency"]
UNCONVERTIBLE: Final = ("unknown_currency", "currency_without_rate", "no_reporting_currency")
EXCLUDED: Final = ("invalid_revenue", "negative_charge", "amount_out_of_bounds")


def rates_frame(rows: pl.DataFrame) -> pl.DataFrame:
    """Rates as `convert` needs them: typed, sorted by day, the euro's own rate (1) on every day."""
    typed = rows.select(list(RATE_SCHEMA)).cast(RATE_SCHEMA).drop_nulls()
    euro = (
        typed.select("rate_date")
        .unique()
        .with_columns(pl.lit(REFERENCE_CURRENCY).alias("currency"), pl.lit(1.0).alias("per_eur"))
    )
    return pl.concat([typed.filter(pl.col("currency") != REFERENCE_CURRENCY), euro]).sort("rate_date", "currency")


def _rate_on(frame: pl.LazyFrame, rates: pl.DataFrame, currency: str, prefix: str) -> pl.LazyFrame:
    """The latest rate of `currency` on or before `_on`, if at most MAX_RATE_AGE_DAYS old."""
    found = frame.join_asof(
        rates.lazy().rename({"rate_date": f"{prefix}_date", "currency": currency, "per_eur": f"{prefix}_rate"}),
        left_on="_on",
        right_on=f"{prefix}_date",
        by=currency,
        strategy="backward",
        check_sortedness=False,
    )
    fresh = (pl.col("_on") - pl.col(f"{prefix}_date")).dt.total_days() <= MAX_RATE_AGE_DAYS
    return found.with_columns(pl.when(fresh).then(pl.col(f"{prefix}_rate")).alias(f"{prefix}_rate")).drop(
        f"{prefix}_date"
    )


def convert(
    frame: pl.LazyFrame,
    *,
    amount: str,
    currency: str,
    day: str,
    rates: pl.DataFrame,
    reporting: pl.DataFrame,
    out: str,
    eur: str,
    reason: str,
) -> pl.LazyFrame:
    """`frame` with `out` (the amount in its workspace's reporting currency), `eur` (in euro, for
    the per-event bound) and `reason` (why `out` is null although there is an amount).

    `rates` is `rates_frame(...)`; `reporting` maps workspace_id -> reporting_currency. A missing
    currency means the amount is already in the reporting currency (what the events documented
    before currencies were converted). Row order is kept.
    """
    last = rates.get_column("rate_date").max() if rates.height else None
    last_day = last if isinstance(last, date) else date.min
    source = pl.coalesce(pl.col(currency), pl.col("reporting_currency"))
    staged = (
        frame.with_row_index("_row")
        .join(reporting.lazy().cast(REPORTING_SCHEMA), on="workspace_id", how="left")
        .with_columns(
            source.alias("_from"),
            pl.col("reporting_currency").alias("_to"),
            pl.min_horizontal(pl.col(day), pl.lit(last_day)).alias("_on"),
        )
        .sort("_on")
    )
    staged = _rate_on(_rate_on(staged, rates, "_from", "_fr"), rates, "_to", "_tr")
    same = pl.col("_from") == pl.col("_to")
    factor = pl.when(same).then(1.0).otherwise(pl.col("_tr_rate") / pl.col("_fr_rate"))
    has_amount = pl.col(amount).is_not_null()
    why = (
        pl.when(~has_amount)
        .then(None)
        .when(pl.col("_to").is_null())
        .then(pl.lit("no_reporting_currency"))
        .when(~pl.col("_from").is_in(list(CURRENCIES)))
        .then(pl.lit("unknown_currency"))
        .when(factor.is_null())
        .then(pl.lit("currency_without_rate"))
    )
    return (
        staged.with_columns(
            (pl.col(amount) * factor).alias(out),
            (pl.col(amount) / pl.col("_fr_rate")).alias(eur),
            why.alias(reason),
        )
        .sort("_row")
        .drop("_row", "_from", "_to", "_on", "_fr_rate", "_tr_rate", "reporting_currency")
    )


def out_of_bounds(eur: pl.Expr) -> pl.Expr:
    """An amount beyond the plausible bound of one event (`MAX_EVENT_AMOUNT_EUR`)."""
    return eur.abs() > MAX_EVENT_AMOUNT_EUR


# Sums in the cube above this are an overflow in the making, not revenue: float64 holds whole
# cents exactly only below 2**53 / 100 (about 9e13), and no app's revenue in any currency comes
# near 1e13 (IDR, the smallest unit the ECB quotes, puts 1e13 at about EUR 500 million).
OVERFLOW_GUARD: Final = 1e13
# The warning check on a day's revenue: a day above SPIKE_FACTOR x the median of the
# SPIKE_WINDOW_DAYS days before it (at least SPIKE_MIN_HISTORY_DAYS of them with revenue). A
# launch or a price change moves revenue by 2-3x, a store-wide feature or a sale by up to 5x; ten
# times the usual day is a unit or currency error far more often than a real day.
SPIKE_FACTOR: Final = 10.0
SPIKE_WINDOW_DAYS: Final = 28
SPIKE_MIN_HISTORY_DAYS: Final = 14


def unconverted(frame: pl.LazyFrame, day: str) -> pl.DataFrame:
    """Per workspace, currency, day and reason: rows with an amount but no converted value."""
    return (
        frame.filter(pl.col("money_issue").is_in(list(UNCONVERTIBLE)))
        .group_by("workspace_id", "currency", pl.col(day).alias("day"), pl.col("money_issue").alias("reason"))
        .agg(pl.len().alias("rows"))
        .sort("day", "workspace_id", "currency")
        .collect()
    )


def unbounded_rows(frame: pl.LazyFrame, columns: tuple[str, ...]) -> int:
    """Rows where a sum is not finite or beyond OVERFLOW_GUARD (in either direction)."""
    bad = pl.any_horizontal([~pl.col(c).is_finite() | (pl.col(c).abs() > OVERFLOW_GUARD) for c in columns])
    return frame.filter(bad).select(pl.len()).collect().item()


def revenue_spikes(subscription: pl.LazyFrame) -> pl.DataFrame:
    """Days whose revenue is above SPIKE_FACTOR x the trailing median (see there), per workspace."""
    daily = (
        subscription.group_by("workspace_id", "event_date")
        .agg(pl.col("revenue").fill_null(0.0).sum().alias("revenue"))
        .sort("workspace_id", "event_date")
        .collect()
    )
    median = (
        pl.col("revenue")
        .rolling_median_by("event_date", f"{SPIKE_WINDOW_DAYS}d", min_samples=SPIKE_MIN_HISTORY_DAYS, closed="left")
        .over("workspace_id")
    )
    return (
        daily.with_columns(median.alias("trailing_median"))
        .filter((pl.col("trailing_median") > 0) & (pl.col("revenue") > SPIKE_FACTOR * pl.col("trailing_median")))
        .select("workspace_id", "event_date", "revenue", "trailing_median")
    )
