"""Timestamps on the wire: UTC, ISO 8601, `Z` suffix, millisecond precision."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_z(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
