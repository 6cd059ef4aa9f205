"""GET /v1/workspace: the workspace the key belongs to."""

from __future__ import annotations

from flask import Response, jsonify

from api.auth import principal, require_key
from api.context import state
from api.v1 import blueprint
from transforms.timefmt import iso_z
from warehouse.workspaces import get_workspace


@blueprint.get("/workspace")
@require_key()
def read_workspace() -> Response:
    with state().db.read() as conn:
        ws = get_workspace(conn, principal().workspace_id)
    return jsonify(
        {
            "id": ws.id,
            "name": ws.name,
            "created_at": iso_z(ws.created_at),
            "reporting_currency": ws.reporting_currency,
            "timezone": ws.timezone,
        }
    )
