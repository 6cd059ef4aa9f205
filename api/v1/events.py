"""POST /v1/events: one product or revenue event, landed like an ingest callback (source "api")."""

from __future__ import annotations

from typing import Literal

from flask import Response
from pydantic import BaseModel, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import JsonObject, LakeTimestamp
from transforms.api_events import api_event
from transforms.timefmt import parse_iso8601
from warehouse.db import utcnow
from warehouse.events import landing

# Same limits as the landed_events / event_claims columns.
NAME_PATTERN = r"^[A-Za-z0-9_.:-]+$"


class EventBody(BaseModel):
    model_config = ConfigDict(strict=True)

    event: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN, description="Event name, e.g. trial_start.")
    user_id: str = Field(min_length=1, max_length=200, description="FloKit-side user id.")
    timestamp: LakeTimestamp = Field(
        description="ISO 8601; no offset means UTC; from 2024-01-01 to one day ahead of now.",
    )
    properties: JsonObject = Field(
        default_factory=dict, description="e.g. campaign_id, creative_id, product_id, price, currency."
    )
    event_id: str | None = Field(
        None,
        min_length=1,
        max_length=80,
        pattern=NAME_PATTERN,
        description="Your id for this event: resending it answers duplicate. Omitted: derived from the content.",
    )


class EventAccepted(BaseModel):
    event_id: str
    status: Literal["accepted", "duplicate"]


@blueprint.post("/events")
@require_key(write=True)
@operation(
    summary="Send one event",
    description="202 {event_id, status: accepted}; the same event again (same event_id, or same content "
    "without one) answers 202 with status duplicate and is not landed twice.",
    body=EventBody,
    responses={202: EventAccepted},
    tags=["events"],
)
def send_event(body: EventBody) -> Response:
    event = api_event(
        workspace_id=principal().workspace_id,
        event=body.event,
        user_id=body.user_id,
        occurred_at=parse_iso8601(body.timestamp),
        properties=body.properties,
        received_at=utcnow(),
        event_id=body.event_id,
    )
    with state().db.write() as conn:
        result = landing.land(conn, [event])
    status = "accepted" if result.written else "duplicate"
    return respond(EventAccepted(event_id=event.event_id, status=status), 202)
