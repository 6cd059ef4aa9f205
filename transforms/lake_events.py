"""The `canonical_events` lake partition and its quality checks, as pure Polars functions.

Landing deduplicates within the 30-day claim window; a redelivery that arrives after the window
lands again. The partition therefore keeps one row per (workspace_id, event_id), the first one
landed, so the lake never double counts whatever the delivery history was.
"""

from __future__ import annotations

import polars as pl


def partition_events(landed: pl.LazyFrame) -> pl.LazyFrame:
    """One row per event of the day, ordered by time (stable: same input, same file)."""
    return landed.unique(subset=["workspace_id", "event_id"], keep="first", maintain_order=True).sort(
        ["occurred_at", "workspace_id", "event_id"], nulls_last=True
    )


def duplicate_event_ids(frame: pl.DataFrame) -> int:
    """Rows beyond the first for any (workspace_id, event_id): 0 in a healthy partition."""
    return frame.height - frame.select(pl.struct("workspace_id", "event_id").n_unique()).item()


def null_occurred_at(frame: pl.DataFrame) -> int:
    return frame["occurred_at"].null_count()
