"""Timestamps on the wire: UTC, ISO 8601, `Z` suffix, millisecond precision."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_z(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware datetime")
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Accepted range of client timestamps: anything outside is a client bug (a zero date, seconds
# sent as milliseconds), and would create absurd lake partitions.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)


def parse_iso8601(text: str) -> datetime:
    """An ISO 8601 timestamp as an aware UTC datetime; no offset means UTC. ValueError if not."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"must be an ISO 8601 timestamp such as 2026-11-21T09:30:00Z, got {text[:40]!r}") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    if not EARLIEST <= value < LATEST:
        raise ValueError("must be between 2000-01-01 and 2100-01-01")
    return value.astimezone(UTC)
