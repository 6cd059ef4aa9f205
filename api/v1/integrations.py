"""Integrations: list, read with `sync_stats`, and queue a sync (spec "Integration").

The API never calls a provider: `POST .../sync` inserts a queued `integration_syncs` row and
answers 202; the Dagster sensor turns it into a run. While a sync of the integration is queued
or running, a new request answers 202 with that sync's id (the database's unique `active_for`
keeps it so under concurrent requests). The status is read back with `GET .../{id}` or heard
through the `integration.error` webhook.
"""

from __future__ import annotations

from typing import Annotated, Literal

from flask import Response
from pydantic import BaseModel, Field

from api.auth import principal, require_key
from api.context import state
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from api.validators import path_id
from transforms.integrations.kinds import INTEGRATION_TYPES
from transforms.integrations.status import INTEGRATION_STATUSES
from transforms.timefmt import iso_z
from warehouse.db import utcnow
from warehouse.integrations import repository as repo
from warehouse.integrations.stats import sync_stats

INTEGRATION_ID = path_id()
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
IntegrationType = Literal[INTEGRATION_TYPES]  # type: ignore[valid-type]
IntegrationStatus = Literal[INTEGRATION_STATUSES]  # type: ignore[valid-type]


class Integration(BaseModel):
    id: str = Field(description="Prefix `int_`.")
    type: IntegrationType
    status: IntegrationStatus
    last_synced_at: Timestamp | None = Field(description="End of the last successful sync; null before one.")
    error_message: str | None = Field(description="The provider's refusal when status is `error`, else null.")


class SyncStats(BaseModel):
    events_last_24h: int
    events_total: int
    earliest_event_at: Timestamp | None = Field(description="Null while nothing has arrived.")


class IntegrationDetail(Integration):
    sync_stats: SyncStats


class IntegrationList(BaseModel):
    integrations: list[Integration]


class IntegrationEnvelope(BaseModel):
    integration: IntegrationDetail


class SyncQueued(BaseModel):
    status: Literal["ok"]
    sync_id: str = Field(description="Prefix `sync_`; the pending sync's id when one was already queued or running.")


def _summary(i: repo.Integration) -> dict[str, object]:
    return {
        "id": i.id,
        "type": i.type,
        "status": i.status,
        "last_synced_at": iso_z(i.last_synced_at),
        "error_message": i.error_message if i.status == "error" else None,
    }


@blueprint.get("/integrations")
@require_key()
@operation(summary="List the workspace's integrations", responses={200: IntegrationList}, tags=["integrations"])
def list_integrations() -> Response:
    with state().db.read() as conn:
        found = repo.list_integrations(conn, workspace_id=principal().workspace_id)
    return respond(IntegrationList.model_validate({"integrations": [_summary(i) for i in found]}))


@blueprint.get("/integrations/<integration_id>")
@require_key()
@operation(
    summary="One integration with its sync_stats",
    responses={200: IntegrationEnvelope},
    path_params={"integration_id": INTEGRATION_ID},
    tags=["integrations"],
)
def read_integration(integration_id: str) -> Response:
    app = state()
    with app.db.read() as conn:
        integration = repo.get_integration(conn, integration_id=integration_id, workspace_id=principal().workspace_id)
        stats = sync_stats(conn, app.settings.paths.lake(), integration, utcnow())
    detail = {
        **_summary(integration),
        "sync_stats": {
            "events_last_24h": stats.events_last_24h,
            "events_total": stats.events_total,
            "earliest_event_at": iso_z(stats.earliest_event_at),
        },
    }
    return respond(IntegrationEnvelope.model_validate({"integration": detail}))


@blueprint.post("/integrations/<integration_id>/sync")
@require_key(write=True)
@operation(
    summary="Queue a sync of the integration",
    description="Answers 202 at once; the sync runs asynchronously. While a sync of the integration is queued or "
    "running, answers 202 with that sync's id. A disconnected integration answers 409.",
    responses={202: SyncQueued},
    path_params={"integration_id": INTEGRATION_ID},
    errors=(404, 409),
    tags=["integrations"],
)
def sync_integration(integration_id: str) -> Response:
    with state().db.write() as conn:
        sync, _created = repo.request_sync(
            conn, integration_id=integration_id, workspace_id=principal().workspace_id, trigger="manual"
        )
    return respond(SyncQueued(status="ok", sync_id=sync.id), status=202)
