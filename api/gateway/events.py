"""POST /api/paywall/events: paywall funnel events from apps, landed like ingest callbacks.

The batch lands in one transaction: either every event is claimed and landed (or counted as a
duplicate of an earlier delivery) and the answer is 200, or nothing is kept and the app may
retry. Ids are derived from the content, so a retried batch lands each event once.
"""

from __future__ import annotations

from flask import Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.context import state
from api.errors import ApiError
from api.gateway import blueprint
from api.gateway.auth import current_app_user, require_app_user
from api.openapi import operation
from api.responses import respond
from api.validators import Id, LakeTimestamp, json_object
from transforms.paywall_events import MAX_EVENTS, FunnelType, funnel_event
from transforms.timefmt import parse_iso8601
from warehouse.db import utcnow
from warehouse.events import landing


class FunnelProperties(BaseModel):
    model_config = ConfigDict(extra="allow")
    paywall_id: str = Field(min_length=1, max_length=100)
    variant_id: str = Field(min_length=1, max_length=100)


class FunnelEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    event_type: FunnelType
    app_id: Id = Field(description="Must be the app of the x-app-key.")
    properties: FunnelProperties = Field(description="paywall_id and variant_id required; others passed through.")
    country: str | None = Field(
        None, pattern=r"^[A-Za-z]{2}$", description="ISO 3166-1 alpha-2; used only if server-side resolution fails."
    )
    platform: str | None = Field(None, max_length=20, description="e.g. ios, android.")
    occurred_at: LakeTimestamp | None = Field(None, description="ISO 8601; omitted: when received.")

    @field_validator("properties")
    @classmethod
    def _json(cls, value: FunnelProperties) -> FunnelProperties:
        json_object(value.model_dump())
        return value


class FunnelBatch(BaseModel):
    model_config = ConfigDict(extra="ignore")
    events: list[FunnelEvent] = Field(min_length=1, max_length=MAX_EVENTS)


class Accepted(BaseModel):
    accepted: int = Field(description="Events accepted: landed now, or already landed by an earlier delivery.")


@blueprint.post("/api/paywall/events")
@require_app_user
@operation(
    summary="Send paywall funnel events",
    description="1 to 50 events for the app of the x-app-key and the user of x-user-id. Every event's app_id "
    "must be that app (403). Landed for the warehouse; resending the same events does not count them twice.",
    body=FunnelBatch,
    responses={200: Accepted},
    errors=(401, 403),
    security="appKey",
    tags=["paywall"],
)
def paywall_events(body: FunnelBatch) -> Response:
    app, user = current_app_user()
    foreign = sorted({e.app_id for e in body.events if e.app_id != app.id})
    if foreign:
        raise ApiError(403, f"Event app_id {foreign[0]} does not match the app of this x-app-key")
    received = utcnow()
    events = [
        funnel_event(
            workspace_id=app.workspace_id,
            app_id=app.id,
            user_id=user,
            event_type=e.event_type,
            properties=e.properties.model_dump(),
            occurred_at=parse_iso8601(e.occurred_at) if e.occurred_at else received,
            received_at=received,
            country=e.country,  # no server-side country resolution is configured: the client's is used
            platform=e.platform,
        )
        for e in body.events
    ]
    with state().db.write() as conn:
        landing.land(conn, events)
    return respond(Accepted(accepted=len(events)))
