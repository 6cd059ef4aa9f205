"""A ready-to-use workspace in one transaction: what `flokit admin bootstrap` and `flokit up` create.

Later features extend `bootstrap` with their own provisioning (ingest credentials, demo data);
the returned dictionary only ever gains keys, never renames them (CLI contract).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from transforms.event_types import INSTALL
from transforms.ingest.attribution import ACTIVITY_KIND_KEY, ATTRIBUTION_PROVIDER_A
from warehouse import workspaces
from warehouse.ingest import repository as ingest


def bootstrap(conn: Connection, *, name: str, actor: str = "cli") -> dict[str, Any]:
    ws = workspaces.create_workspace(conn, name=name, actor=actor)
    read_write = workspaces.create_key(conn, workspace_id=ws.id, scope="read_write", actor=actor)
    read_only = workspaces.create_key(conn, workspace_id=ws.id, scope="read_only", actor=actor)
    app = workspaces.create_app(conn, workspace_id=ws.id, name=f"{name} app", actor=actor)
    # Ingest: the first attribution vendor with a fresh app token and secret, and the one
    # mapping every attribution setup needs (install callbacks carry no event token).
    credential = ingest.create_credential(conn, workspace_id=ws.id, vendor=ATTRIBUTION_PROVIDER_A.vendor, actor=actor)
    ingest.set_mapping(
        conn,
        workspace_id=ws.id,
        vendor=credential.vendor,
        token=f"{ACTIVITY_KIND_KEY}install",
        event_type=INSTALL,
        actor=actor,
    )
    return {
        "workspace_id": ws.id,
        "api_key_read_write": read_write.api_key,
        "api_key_read_only": read_only.api_key,
        "app_id": app.id,
        "app_key": app.publishable_key,
        "ingest_vendor": credential.vendor,
        "ingest_secret": credential.secret,
        "ingest_app_token": credential.app_token,
    }
