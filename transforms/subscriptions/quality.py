"""The asset checks' rules for `subscription_metrics` (pure: a frame in, a count of failures out)."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from transforms.subscriptions.metrics import GROUP_COLUMNS

_KEYS = ["workspace_id", *GROUP_COLUMNS]


def negative_stocks(daily: pl.LazyFrame) -> int:
    """Rows with fewer than no actives or trials, or a negative MRR (a lapse without its start)."""
    bad = (pl.col("active_subscriptions") < 0) | (pl.col("active_trials") < 0) | (pl.col("mrr") < -1e-9)
    return int(daily.filter(bad).select(pl.len()).collect().item())


def broken_identity(daily: pl.LazyFrame) -> int:
    """Rows whose actives are not the previous day's + new - churned + reactivated, within their
    group (a day without a row held no actives and moved none)."""
    previous = pl.col("active_subscriptions").shift(1).over(_KEYS)
    consecutive = pl.col("date").shift(1).over(_KEYS) == pl.col("date") - timedelta(days=1)
    before = pl.when(consecutive).then(previous).otherwise(0)
    expected = before + pl.col("new_subscriptions") - pl.col("churned_subscriptions") + pl.col("reactivations")
    frame = daily.sort([*_KEYS, "date"], nulls_last=True).with_columns(expected.alias("_expected"))
    return int(frame.filter(pl.col("active_subscriptions") != pl.col("_expected")).select(pl.len()).collect().item())
