"""The canonical event: what every source (ingest, v1 events, paywall events, demo data) becomes.

One shape, one derived-id rule, one lake schema, so that dedup and the warehouse never need to
know where an event came from.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

# The earliest UTC day of the lake (its first daily partition). An event before it has no day
# to live in: sources refuse or drop it (an attribution callback two years late is a vendor
# bug, not a conversion).
LAKE_START = date(2024, 1, 1)
# Clocks drift: an event stamped up to a day ahead is accepted (its day is written once that
# UTC day has begun); later ones are bogus.
MAX_FUTURE = timedelta(days=1)


def lake_can_hold(occurred_at: datetime, received_at: datetime) -> bool:
    """Whether an event's time falls in a day the lake has (or will have within a day)."""
    return occurred_at.date() >= LAKE_START and occurred_at <= received_at + MAX_FUTURE


# Lake and catalog column contract of `canonical_events` (properties are JSON text in Parquet,
# so any key survives the round trip and DuckDB reads them with json_extract).
CANONICAL_EVENT_SCHEMA = pl.Schema(
    {
        "event_id": pl.String(),
        "workspace_id": pl.String(),
        "event_type": pl.String(),
        "occurred_at": pl.Datetime("us", "UTC"),
        "platform": pl.String(),
        "country": pl.String(),
        "user_id": pl.String(),
        "adid": pl.String(),
        "idfa": pl.String(),
        "gps_adid": pl.String(),
        "properties": pl.String(),
        "source": pl.String(),
        "received_at": pl.Datetime("us", "UTC"),
    }
)


@dataclass(frozen=True)
class CanonicalEvent:
    event_id: str
    workspace_id: str
    event_type: str
    occurred_at: datetime
    source: str
    received_at: datetime
    platform: str | None = None
    country: str | None = None
    user_id: str | None = None
    adid: str | None = None
    idfa: str | None = None
    gps_adid: str | None = None
    properties: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("occurred_at", "received_at"):
            if getattr(self, name).tzinfo is None:
                raise ValueError(f"{name} must be timezone-aware")

    @property
    def day(self) -> date:
        """The lake partition: UTC day of occurrence."""
        return self.occurred_at.astimezone(UTC).date()


@dataclass(frozen=True)
class DerivedId:
    """What a source without an id of its own derives an event's id from, besides the event's
    source, type and time (`derived_event_id`): the app, the user and a raw id (or the content)."""

    app: str
    user: str | None
    raw: str | None


def canonical_event(
    *,
    source: str,
    workspace_id: str,
    event_type: str,
    occurred_at: datetime,
    received_at: datetime,
    event_id: str | DerivedId,
    platform: str | None = None,
    country: str | None = None,
    user_id: str | None = None,
    adid: str | None = None,
    idfa: str | None = None,
    gps_adid: str | None = None,
    properties: dict[str, Any] | None = None,
) -> CanonicalEvent:
    """The one way a source builds a canonical event (ingest callbacks, v1 events, paywall events).

    `event_id` is the id the sender gave (a client's or a vendor's stable id), or a `DerivedId`,
    hashed together with this event's own source, type and time, so the derived id can never
    disagree with the event it names."""
    if isinstance(event_id, DerivedId):
        event_id = derived_event_id(
            source=source,
            app=event_id.app,
            user=event_id.user,
            event_type=event_type,
            occurred_at=occurred_at,
            raw_event_id=event_id.raw,
        )
    return CanonicalEvent(
        event_id=event_id,
        workspace_id=workspace_id,
        event_type=event_type,
        occurred_at=occurred_at,
        source=source,
        received_at=received_at,
        platform=platform,
        country=country,
        user_id=user_id,
        adid=adid,
        idfa=idfa,
        gps_adid=gps_adid,
        properties=properties if properties is not None else {},
    )


def derived_event_id(
    *,
    source: str,
    app: str,
    user: str | None,
    event_type: str,
    occurred_at: datetime,
    raw_event_id: str | None,
) -> str:
    """A stable id for callbacks without one: the same delivery always hashes the same.

    Spec: "hashed from vendor, app, user, event type, timestamp and raw event id". Fields are
    joined with a separator that cannot occur in them (\\x1f) so ("a", "bc") != ("ab", "c").
    """
    parts = [source, app, user or "", event_type, occurred_at.astimezone(UTC).isoformat(), raw_event_id or ""]
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
    return f"evt_{digest[:40]}"
