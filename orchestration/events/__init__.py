"""Canonical events: landed rows into the daily-partitioned lake dataset, dedup claim pruning."""
