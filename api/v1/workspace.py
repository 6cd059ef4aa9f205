"""GET /v1/workspace: the workspace the key belongs to."""

from __future__ import annotations

from typing import Annotated

from flask import Response
from pydantic import BaseModel, Field

from api.auth import principal, require_key
from api.context import state
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from transforms.timefmt import iso_z
from warehouse.workspaces import get_workspace


class WorkspaceOut(BaseModel):
    id: str
    name: str
    created_at: Annotated[str, Field(json_schema_extra={"format": "date-time"})]
    reporting_currency: str
    timezone: str


@blueprint.get("/workspace")
@require_key()
@operation(summary="The workspace of the API key", responses={200: WorkspaceOut}, tags=["workspace"])
def read_workspace() -> Response:
    with state().db.read() as conn:
        ws = get_workspace(conn, principal().workspace_id)
    return respond(
        WorkspaceOut(
            id=ws.id,
            name=ws.name,
            created_at=iso_z(ws.created_at) or "",
            reporting_currency=ws.reporting_currency,
            timezone=ws.timezone,
        )
    )
