"""Events sent to `POST /v1/events`, as canonical events.

Idempotency: a client `event_id` is the dedup key as sent; without one, the id is derived from
(source, workspace, user, event, timestamp, properties), so a client retrying the same request
lands the event once, and two different events at the same instant stay two events.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from transforms.events import CanonicalEvent, DerivedId, canonical_event

SOURCE = "api"
PLATFORMS = frozenset({"ios", "android"})
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")


def canonical_json(properties: dict[str, Any]) -> str:
    """One spelling per object (sorted keys, no spaces); ValueError for NaN or Infinity,
    which JSON cannot carry and PostgreSQL's json type rejects."""
    return json.dumps(properties, sort_keys=True, separators=(",", ":"), allow_nan=False)


def api_event(
    *,
    workspace_id: str,
    event: str,
    user_id: str,
    occurred_at: datetime,
    properties: dict[str, Any],
    received_at: datetime,
    event_id: str | None = None,
) -> CanonicalEvent:
    """The canonical event for one API event; `platform` and `country` properties, when valid,
    also fill the canonical columns (lowercase platform, uppercase country)."""
    platform = properties.get("platform")
    country = properties.get("country")
    return canonical_event(
        event_id=event_id or DerivedId(app=workspace_id, user=user_id, raw=canonical_json(properties)),
        workspace_id=workspace_id,
        event_type=event,
        occurred_at=occurred_at,
        source=SOURCE,
        received_at=received_at,
        platform=platform.lower() if isinstance(platform, str) and platform.lower() in PLATFORMS else None,
        country=country.upper() if isinstance(country, str) and _COUNTRY.match(country) else None,
        user_id=user_id,
        properties=properties,
    )
