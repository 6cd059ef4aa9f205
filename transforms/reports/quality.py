"""Data-quality facts the asset checks assert (pure: frames in, numbers out)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl


def duplicate_keys(frame: pl.LazyFrame, key: Sequence[str]) -> int:
    """How many key values occur more than once."""
    return frame.group_by(list(key)).len().filter(pl.col("len") > 1).select(pl.len()).collect().item()


def negative_rows(frame: pl.LazyFrame, columns: Sequence[str]) -> int:
    """Rows where any of the columns is below zero (a cent of float noise is not negative)."""
    condition = pl.any_horizontal([pl.col(c) < -1e-9 for c in columns])
    return frame.filter(condition).select(pl.len()).collect().item()


def row_count_drop(previous: int | None, current: int, tolerated_drop: float) -> bool:
    """True when the table shrank by more than the tolerated fraction since the last run.
    A cube only grows with time, so a large drop means lost input, not a quieter day."""
    return previous is not None and previous > 0 and current < previous * (1 - tolerated_drop)
