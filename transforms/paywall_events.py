"""Paywall funnel events sent by apps (POST /api/paywall/events), as canonical events.

The spec's funnel names map onto the canonical vocabulary: `impression` and `offer_tap` are the
paywall events the reports already read (onboarding paywall and offer of a cohort);
`purchase_start`, `trial_start`, `convert` and `cancel` become `paywall_*` types, kept apart
from the store-confirmed billing facts. Ids are derived from the content, so an app retrying a
batch lands each event once.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from transforms.api_events import canonical_json
from transforms.event_types import (
    PAYWALL_CANCEL,
    PAYWALL_CONVERT,
    PAYWALL_IMPRESSION,
    PAYWALL_OFFER_TAP,
    PAYWALL_PURCHASE_START,
    PAYWALL_TRIAL_START,
)
from transforms.events import CanonicalEvent, DerivedId, canonical_event

SOURCE = "paywall"
FunnelType = Literal["impression", "offer_tap", "purchase_start", "trial_start", "convert", "cancel"]
CANONICAL_TYPE: dict[str, str] = {
    "impression": PAYWALL_IMPRESSION,
    "offer_tap": PAYWALL_OFFER_TAP,
    "purchase_start": PAYWALL_PURCHASE_START,
    "trial_start": PAYWALL_TRIAL_START,
    "convert": PAYWALL_CONVERT,
    "cancel": PAYWALL_CANCEL,
}
MAX_EVENTS = 50  # spec limits: events per request, 1 to 50
_PLATFORM = re.compile(r"^[a-z]{2,20}$")


def funnel_event(
    *,
    workspace_id: str,
    app_id: str,
    user_id: str,
    event_type: str,
    properties: dict[str, Any],
    occurred_at: datetime,
    received_at: datetime,
    country: str | None,
    platform: str | None,
) -> CanonicalEvent:
    """One funnel event. `country` is already resolved (server side first, else the client's);
    the app id is kept in the properties, so funnels can be cut by app."""
    kind = CANONICAL_TYPE[event_type]
    props = {**properties, "app_id": app_id}
    return canonical_event(
        event_id=DerivedId(app=app_id, user=user_id, raw=canonical_json(props)),
        workspace_id=workspace_id,
        event_type=kind,
        occurred_at=occurred_at,
        source=SOURCE,
        received_at=received_at,
        platform=platform.lower() if platform and _PLATFORM.match(platform.lower()) else None,
        country=country.upper() if country else None,
        user_id=user_id,
        properties=props,
    )
