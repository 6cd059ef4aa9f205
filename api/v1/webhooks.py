"""POST /v1/webhooks/test: queue a sample event (`"test": true`) to the workspace's endpoints.
GET /v1/events: the workspace's event log, the envelopes the webhooks carry (issue 36, preview).

The API only writes the outbox row (event + deliveries) and answers 202; the Dagster sensor
delivers it like any other event, so the test exercises the real path and shows up in the
delivery history (`flokit admin webhooks deliveries`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from flask import Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import Id
from transforms.webhooks.envelope import EVENT_TYPES
from warehouse.db import utcnow
from warehouse.webhooks.endpoints import get_endpoint
from warehouse.webhooks.event_log import RETENTION, UnknownCursor, events_page
from warehouse.webhooks.outbox import emit_test_event


class WebhookTestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event_type: str = Field(description="One of the webhook event types, e.g. action.approved.")
    endpoint_id: Id | None = Field(
        default=None, description="Send only to this endpoint (enabled; subscribed or not). Default: every subscriber."
    )


class QueuedDelivery(BaseModel):
    delivery_id: str
    endpoint_id: str


class WebhookTestQueued(BaseModel):
    delivery_id: str = Field(description="The first delivery; every one is in the delivery history.")
    event_id: str
    event_type: str
    status: Literal["queued"]
    deliveries: list[QueuedDelivery]


@blueprint.post("/webhooks/test")
@require_key(write=True)
@operation(
    summary="Send a sample webhook",
    description='Queues a sample envelope (`"test": true`) of the given type to the workspace\'s subscribed '
    "enabled endpoints (or to one endpoint) and answers 202 with its delivery ids; the Dagster sensor sends it.",
    body=WebhookTestRequest,
    responses={202: WebhookTestQueued},
    errors=(404,),
    tags=["webhooks"],
)
def send_test_webhook(body: WebhookTestRequest) -> Response:
    if body.event_type not in EVENT_TYPES:
        raise ApiError(400, f"Unknown event_type {body.event_type!r}; expected one of {', '.join(EVENT_TYPES)}")
    workspace_id = principal().workspace_id
    with state().db.write() as conn:
        if body.endpoint_id is not None:
            endpoint = get_endpoint(conn, workspace_id=workspace_id, endpoint_id=body.endpoint_id)  # NotFound: 404
            if endpoint.status != "enabled":
                raise ApiError(400, f"Webhook endpoint {body.endpoint_id} is disabled; enable it first")
        emitted = emit_test_event(
            conn, workspace_id=workspace_id, event_type=body.event_type, endpoint_id=body.endpoint_id
        )
        if not emitted.deliveries:
            # Raising rolls the transaction back: no orphan test event without a delivery.
            raise ApiError(400, f"No enabled webhook endpoint is subscribed to {body.event_type}")
    return respond(
        WebhookTestQueued(
            delivery_id=emitted.deliveries[0][0],
            event_id=emitted.event_id,
            event_type=body.event_type,
            status="queued",
            deliveries=[QueuedDelivery(delivery_id=d, endpoint_id=e) for d, e in emitted.deliveries],
        ),
        202,
    )


EventType = Literal[EVENT_TYPES]  # type: ignore[valid-type]


class EventsQuery(BaseModel):
    since: AwareDatetime | None = Field(
        None,
        description="Only events created at or after this instant (ISO 8601 with an offset: 2026-11-01T00:00:00Z).",
    )
    type: EventType | None = Field(None, description="Only events of this type.")
    limit: int = Field(20, ge=1, le=100, description="Page size (default 20, max 100).")
    starting_after: Id | None = Field(
        None, description="An event id from the previous page (its last): the page continues after it."
    )


class EventLog(BaseModel):
    events: list[dict[str, Any]] = Field(
        description="Envelopes {id, type, created_at, workspace_id, data}, byte for byte what the webhooks carry, "
        "newest first."
    )
    has_more: bool


@blueprint.get("/events")
@require_key()
@operation(
    summary="The workspace's event log (preview)",
    description=f"The events the webhooks carry, for receivers that poll or reconcile after an outage: the last "
    f"{RETENTION.days} days, newest first; samples from POST /v1/webhooks/test excluded. Page with limit and "
    "starting_after (the last id of the previous page) while has_more; 400 for a starting_after that names no "
    "event of the log.",
    query=EventsQuery,
    responses={200: EventLog},
    errors=(400,),
    tags=["webhooks"],
)
def list_events(query: EventsQuery) -> Response:
    try:
        with state().db.read() as conn:
            bodies, more = events_page(
                conn, workspace_id=principal().workspace_id, now=utcnow(), since=query.since,
                event_type=query.type, limit=query.limit, starting_after=query.starting_after,
            )  # fmt: skip
    except UnknownCursor:
        raise ApiError(400, f"starting_after: no event {query.starting_after} in this workspace's log") from None
    return respond(EventLog(events=[json.loads(b) for b in bodies], has_more=more))
