"""From canonical events to the report inputs: acquisitions, subscription events, active days, spend.

Each function is a LazyFrame chain that the caller collects, except `acquisitions` and
`user_cohorts`, which collect their own stages on the engine that suits each (see there). All
are applied per daily partition and are idempotent (applying them again to their own output
changes nothing for acquisitions and spend), so a late partition can be re-run alone.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from transforms.reports import money
from transforms.reports.schemas import (
    ACQUISITION_SCHEMA,
    ACTIVE_DAY_SCHEMA,
    CHARGES,
    CLEAN_SPEND_SCHEMA,
    DIMENSIONS,
    INSTALL,
    NONE_LABEL,
    ORGANIC,
    PAYWALL_IMPRESSION,
    PAYWALL_OFFER_TAP,
    REFUND,
    SPEND_KEY,
    SUBSCRIPTION_EVENT_SCHEMA,
    USER_COHORT_SCHEMA,
)

# Properties are flat JSON objects. A regular expression reads a flat string or number value
# an order of magnitude faster than a JSON path (docs/benchmarks.md); rows whose JSON holds an
# escape sequence (rare: quotes or unicode in a value) take the
# exact JSON-path route instead, so no value is ever misread.
_ESCAPED = pl.col("properties").str.contains("\\", literal=True)


def _fast(name: str, number: bool) -> pl.Expr:
    value = r'"?(-?[0-9][0-9.eE+-]*)' if number else r'"([^"\\]*)"'
    return pl.col("properties").str.extract(rf'"{name}"\s*:\s*{value}')


def _exact(name: str) -> pl.Expr:
    return pl.col("properties").str.json_path_match(f"$.{name}")


def with_properties(events: pl.LazyFrame, strings: tuple[str, ...], numbers: tuple[str, ...] = ()) -> pl.LazyFrame:
    """Events with the named properties as columns (`prop_<name>`, strings; cast numbers later)."""
    names = [(n, False) for n in strings] + [(n, True) for n in numbers]
    events = events.cache()  # both branches read it: compute it once
    fast = events.filter(~_ESCAPED).with_columns(_fast(n, num).alias(f"prop_{n}") for n, num in names)
    exact = events.filter(_ESCAPED).with_columns(_exact(n).alias(f"prop_{n}") for n, _ in names)
    return pl.concat([fast, exact])


def _prop(name: str) -> pl.Expr:
    return pl.col(f"prop_{name}")


# Acquisitions are computed in stages, each collected on the engine that is fastest for it: the
# streaming engine filters the lake scans, the in-memory engine picks the first row per user,
# where its sort + unique is much faster than the streaming engine's; the same work as one lazy
# plan was slower on either engine (docs/benchmarks.md).
_SCAN: Final = "streaming"
_PICK: Final = "in-memory"
_KEYS = ["workspace_id", "user_id"]
_INSTALL = "_install"
_IDENTIFIED = pl.col("user_id").is_not_null()
# Every column of canonical events that these transforms read.
REPORT_COLUMNS = (
    "workspace_id",
    "user_id",
    "event_id",
    "event_type",
    "occurred_at",
    "properties",
    "country",
    "platform",
)


def report_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """Identified users' events with only the columns the transforms read.

    Collected once, it feeds every transform: over many days that is cheaper than each
    transform scanning the lake with its own filter (docs/benchmarks.md).
    """
    return events.filter(_IDENTIFIED).select(REPORT_COLUMNS)


def acquisitions(events: pl.LazyFrame) -> pl.DataFrame:
    """First install per (workspace, user, day) in these events, with every group-by value.

    Per day, so that the acquisitions of several days split into the same daily partitions as
    one day at a time (`user_cohorts` then keeps each user's earliest). Campaign, creative and
    country come from the install (no campaign: organic; missing creative or country: "(none)").
    Paywall and offer are the first paywall impression and the first offer tap of the install
    day (the onboarding paywall), "(none)" if none: fixing them on the install day keeps every
    later day's work independent of earlier days.
    """
    installs = (
        events.filter((pl.col("event_type") == INSTALL) & _IDENTIFIED)
        .select("workspace_id", "user_id", "event_id", "occurred_at", "properties", "country", "platform")
        .collect(engine=_SCAN)
    )
    # Each first install gets a row number: the touches carry it from the join on, so that
    # picking the first touch and attaching it work on one integer rather than three strings.
    first = _first_installs(installs.lazy()).with_row_index(_INSTALL).collect(engine=_PICK)
    day_keys = [*_KEYS, "cohort_date"]
    # Same-day touches only, found before any JSON is read (most impressions are later visits).
    touches = (
        events.filter(pl.col("event_type").is_in((PAYWALL_IMPRESSION, PAYWALL_OFFER_TAP)) & _IDENTIFIED)
        .select(
            *_KEYS,
            "event_type",
            "event_id",
            "occurred_at",
            "properties",
            pl.col("occurred_at").dt.date().alias("cohort_date"),
        )
        .join(first.lazy().select(*day_keys, _INSTALL), on=day_keys, how="inner")
        .select(_INSTALL, "event_type", "event_id", "occurred_at", "properties")
        .collect(engine=_SCAN)
    )
    return (
        first.lazy()
        .join(_first_touches(touches.lazy()), on=_INSTALL, how="left")
        .with_columns(pl.col("paywall").fill_null(NONE_LABEL), pl.col("offer").fill_null(NONE_LABEL))
        .select(list(ACQUISITION_SCHEMA))
        .cast(ACQUISITION_SCHEMA)
        .collect(engine=_PICK)
    )


def _first_installs(installs: pl.LazyFrame) -> pl.LazyFrame:
    first = (
        installs.with_columns(pl.col("occurred_at").dt.date().alias("cohort_date"))
        .sort("occurred_at", "event_id")
        .filter(_first_of(*_KEYS, "cohort_date"))
    )
    return with_properties(first, ("campaign", "creative")).select(
        *_KEYS,
        pl.col("occurred_at").alias("installed_at"),
        "cohort_date",
        _prop("campaign").fill_null(ORGANIC).alias("campaign"),
        _prop("creative").fill_null(NONE_LABEL).alias("creative"),
        pl.col("country").fill_null(NONE_LABEL).alias("country"),
        "platform",
    )


def _first_touches(touches: pl.LazyFrame) -> pl.LazyFrame:
    """Per install, the paywall of the first impression and the offer of the first tap."""
    impression = pl.col("event_type") == PAYWALL_IMPRESSION
    # One integer per (install, kind of touch).
    slot = pl.col(_INSTALL).cast(pl.UInt64) * 2 + impression.cast(pl.UInt64)
    first = touches.sort("occurred_at", "event_id").filter(slot.is_first_distinct())
    taps = with_properties(first.filter(~impression), ("product_id", "offer"))
    return (
        with_properties(first.filter(impression), ("paywall_id",))
        .select(_INSTALL, _prop("paywall_id").alias("paywall"))
        .join(
            taps.select(_INSTALL, pl.coalesce(_prop("product_id"), _prop("offer")).alias("offer")),
            on=_INSTALL,
            how="full",
            coalesce=True,
        )
    )


def _first_of(*columns: str) -> pl.Expr:
    """The first row of each distinct value of the columns (in frame order): as `unique(keep=
    "first")`, at about half its cost on the in-memory engine."""
    return pl.struct(*columns).is_first_distinct()


def active_days(events: pl.LazyFrame) -> pl.LazyFrame:
    """Each day an identified user did anything but install: what cohort retention counts.

    Paywall views and taps are three quarters of all events and matter to retention only as
    "was active that day", so they are reduced to these rows rather than carried as subscription
    events (which made every payback refresh read and parse them for nothing).
    """
    return (
        events.filter((pl.col("event_type") != INSTALL) & _IDENTIFIED)
        .select(*_KEYS, pl.col("occurred_at").dt.date().alias("event_date"))
        .unique(maintain_order=True)
        .cast(ACTIVE_DAY_SCHEMA)
    )


def user_cohorts(acquired: pl.LazyFrame) -> pl.DataFrame:
    """Across daily partitions: each user's earliest acquisition (a reinstall is not a new user).

    Collected on the in-memory engine, like the picks of `acquisitions`, for the same reason
    (docs/benchmarks.md)."""
    return (
        acquired.sort("installed_at", "user_id")
        .filter(_first_of(*_KEYS))
        .select(list(USER_COHORT_SCHEMA))
        .cast(USER_COHORT_SCHEMA)
        .collect(engine=_PICK)
    )


def subscription_events(events: pl.LazyFrame, rates: pl.DataFrame, reporting: pl.DataFrame) -> pl.LazyFrame:
    """Every event of identified users but installs and paywall views and taps, with the
    subscription fields parsed once and the money in the workspace's reporting currency.

    `amount` and `currency` are the event's own, kept for audit; `revenue` and `refund` are in
    the reporting currency at the ECB rate of the event's day (`money.convert`; `rates` and
    `reporting` as it takes them). Charges carry gross revenue; refunds carry the refunded
    amount (both >= 0; a negative amount in a refund is read as its absolute value, since
    vendors disagree on the sign). A negative charge is not revenue, and neither is an amount
    that is not a finite number or beyond the per-event bound: they book 0 and `money_issue`
    says why (ingest drops them; these come from elsewhere, e.g. a lake written directly). An
    amount that cannot be converted books null, with its reason, for the asset checks to stop.
    Paywall events are read by `acquisitions` (the install day's) and `active_days` (retention).
    """
    event_type = pl.col("event_type")
    others = events.filter(~event_type.is_in((INSTALL, PAYWALL_IMPRESSION, PAYWALL_OFFER_TAP)) & _IDENTIFIED)
    parsed = with_properties(others, ("product_id", "offer", "currency"), ("revenue",))
    money_event = event_type.is_in((*CHARGES, REFUND))
    base = parsed.select(
        "workspace_id",
        "user_id",
        "event_id",
        "event_type",
        "occurred_at",
        pl.col("occurred_at").dt.date().alias("event_date"),
        pl.coalesce(_prop("product_id"), _prop("offer")).alias("product_id"),
        pl.when(money_event).then(_prop("revenue").cast(pl.Float64, strict=False)).alias("amount"),
        _prop("currency").str.to_uppercase().alias("currency"),
    )
    converted = money.convert(
        base,
        amount="amount",
        currency="currency",
        day="event_date",
        rates=rates,
        reporting=reporting,
        out="_value",
        eur="_eur",
        reason="_unconvertible",
    )
    amount = pl.col("amount")
    excluded = (
        pl.when(amount.is_null())
        .then(None)
        .when(~amount.is_finite())
        .then(pl.lit("invalid_revenue"))
        .when(event_type.is_in(CHARGES) & (amount < 0))
        .then(pl.lit("negative_charge"))
        .when(money.out_of_bounds(pl.col("_eur")))
        .then(pl.lit("amount_out_of_bounds"))
    )
    value = pl.when(excluded.is_not_null()).then(0.0).when(amount.is_null()).then(0.0).otherwise(pl.col("_value"))
    return (
        converted.with_columns(pl.coalesce(excluded, pl.col("_unconvertible")).alias("money_issue"))
        .with_columns(
            pl.when(event_type.is_in(CHARGES)).then(value).otherwise(0.0).alias("revenue"),
            pl.when(event_type == REFUND).then(value.abs()).otherwise(0.0).alias("refund"),
        )
        .select(list(SUBSCRIPTION_EVENT_SCHEMA))
        .cast(SUBSCRIPTION_EVENT_SCHEMA)
    )


def clean_spend(raw: pl.LazyFrame, rates: pl.DataFrame, reporting: pl.DataFrame) -> pl.LazyFrame:
    """One row per (workspace, day, campaign, creative, country): a re-delivered row replaces
    the earlier one (last in file order wins); negative amounts are corrections and clip to 0.

    `amount` and `currency` are the delivery's own; `spend` is in the workspace's reporting
    currency at the ECB rate of the spend day, null (with `money_issue`) when unconvertible.
    A day's spend of a campaign has no per-event bound: it is not one purchase.
    """
    deduplicated = (
        raw.with_columns(
            pl.col("campaign").fill_null(ORGANIC),
            pl.col("creative").fill_null(NONE_LABEL),
            pl.col("country").fill_null(NONE_LABEL),
            pl.col("spend").fill_null(0.0).clip(lower_bound=0.0).alias("amount"),
            pl.col("currency").str.to_uppercase(),
        )
        .unique(subset=list(SPEND_KEY), keep="last", maintain_order=True)
        .drop("spend")
    )
    return (
        money.convert(
            deduplicated,
            amount="amount",
            currency="currency",
            day="spend_date",
            rates=rates,
            reporting=reporting,
            out="spend",
            eur="_eur",
            reason="money_issue",
        )
        .select(list(CLEAN_SPEND_SCHEMA))
        .cast(CLEAN_SPEND_SCHEMA)
    )


__all__ = [
    "DIMENSIONS",
    "REPORT_COLUMNS",
    "acquisitions",
    "active_days",
    "clean_spend",
    "report_events",
    "subscription_events",
    "user_cohorts",
]
