"""`paywall_events`: the paywall funnel as analysts query it, one row per step an app reported
(POST /api/paywall/events, the demo's paywall views and taps), with its paywall, variant and
offer as columns instead of JSON. Client-reported, so apart from the store-confirmed billing
facts: a `convert` is the app's word, not a subscription."""

from __future__ import annotations

from typing import Final

import polars as pl

from transforms import event_types as t
from transforms.reports.lifecycle import with_properties

# The canonical paywall types and the funnel step each is (the names apps send).
STEPS: Final = {
    t.PAYWALL_IMPRESSION: "impression",
    t.PAYWALL_OFFER_TAP: "offer_tap",
    t.PAYWALL_PURCHASE_START: "purchase_start",
    t.PAYWALL_TRIAL_START: "trial_start",
    t.PAYWALL_CONVERT: "convert",
    t.PAYWALL_CANCEL: "cancel",
}

PAYWALL_EVENT_SCHEMA: Final = pl.Schema(
    {
        "workspace_id": pl.String(),
        "event_id": pl.String(),
        "event_date": pl.Date(),
        "occurred_at": pl.Datetime("us", "UTC"),
        "user_id": pl.String(),
        "app_id": pl.String(),
        "step": pl.String(),
        "paywall_id": pl.String(),
        "variant_id": pl.String(),
        "version": pl.Int64(),
        "product_id": pl.String(),
        "platform": pl.String(),
        "country": pl.String(),
        "source": pl.String(),
    }
)


def paywall_events(events: pl.LazyFrame) -> pl.LazyFrame:
    """The paywall steps among canonical events, their properties parsed."""
    steps = events.filter(pl.col("event_type").is_in(list(STEPS)))
    parsed = with_properties(steps, ("app_id", "paywall_id", "variant_id", "product_id"), ("version",))
    return parsed.select(
        "workspace_id",
        "event_id",
        pl.col("occurred_at").dt.date().alias("event_date"),
        "occurred_at",
        "user_id",
        pl.col("prop_app_id").alias("app_id"),
        pl.col("event_type").replace_strict(STEPS, return_dtype=pl.String).alias("step"),
        pl.col("prop_paywall_id").alias("paywall_id"),
        pl.col("prop_variant_id").alias("variant_id"),
        pl.col("prop_version").cast(pl.Int64, strict=False).alias("version"),
        pl.col("prop_product_id").alias("product_id"),
        "platform",
        "country",
        "source",
    ).cast(PAYWALL_EVENT_SCHEMA)
