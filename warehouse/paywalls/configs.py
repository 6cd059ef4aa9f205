"""Publishing paywall configurations and reading the live one (the gateway's hot path)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.paywall import PaywallDocument
from warehouse import audit
from warehouse.db import utcnow
from warehouse.errors import UnknownApp
from warehouse.paywalls.tables import paywall_configs
from warehouse.tables import apps

MAX_PAYWALL_ID = 100


@dataclass(frozen=True)
class Published:
    app_id: str
    paywall_id: str
    version: int
    document: PaywallDocument
    published_by: str
    published_at: datetime


def publish(conn: Connection, *, app_id: str, paywall_id: str, document: PaywallDocument, actor: str) -> Published:
    """Make `document` the live configuration of the paywall: the next version. Call inside a
    write transaction. The app row is locked first (PostgreSQL), so two publishers of one app
    take turns instead of racing for the same version number; SQLite writers are serial."""
    if not paywall_id or len(paywall_id) > MAX_PAYWALL_ID:
        raise ValueError(f"paywall_id must be 1 to {MAX_PAYWALL_ID} characters")
    app = conn.execute(
        sa.select(apps.c.workspace_id).where(apps.c.id == app_id, apps.c.revoked_at.is_(None)).with_for_update()
    ).first()
    if app is None:
        raise UnknownApp(app_id)
    latest = conn.execute(
        sa.select(sa.func.max(paywall_configs.c.version)).where(
            paywall_configs.c.app_id == app_id, paywall_configs.c.paywall_id == paywall_id
        )
    ).scalar()
    published = Published(
        app_id=app_id,
        paywall_id=paywall_id,
        version=(latest or 0) + 1,
        document=document,
        published_by=actor,
        published_at=utcnow(),
    )
    conn.execute(
        paywall_configs.insert().values(
            app_id=app_id,
            paywall_id=paywall_id,
            version=published.version,
            workspace_id=app.workspace_id,
            document=document.model_dump(mode="json"),
            published_by=actor,
            published_at=published.published_at,
        )
    )
    audit.record(
        conn,
        workspace_id=app.workspace_id,
        actor=actor,
        action="paywall.published",
        subject_id=app_id,
        detail={"paywall_id": paywall_id, "version": published.version},
    )
    return published


def live(conn: Connection, *, app_id: str, paywall_id: str) -> Published | None:
    """The highest published version, or None (no config, or the app is unknown or revoked)."""
    row = conn.execute(
        sa.select(paywall_configs)
        .join(apps, apps.c.id == paywall_configs.c.app_id)
        .where(
            paywall_configs.c.app_id == app_id,
            paywall_configs.c.paywall_id == paywall_id,
            apps.c.revoked_at.is_(None),
        )
        .order_by(paywall_configs.c.version.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    return Published(
        app_id=row.app_id,
        paywall_id=row.paywall_id,
        version=row.version,
        document=PaywallDocument.model_validate(row.document),
        published_by=row.published_by,
        published_at=row.published_at,
    )


def version(conn: Connection, *, app_id: str, paywall_id: str, version: int) -> Published | None:
    """One published version (the history a test's end publishes back from), or None."""
    row = conn.execute(
        sa.select(paywall_configs).where(
            paywall_configs.c.app_id == app_id,
            paywall_configs.c.paywall_id == paywall_id,
            paywall_configs.c.version == version,
        )
    ).first()
    if row is None:
        return None
    return Published(
        app_id=row.app_id,
        paywall_id=row.paywall_id,
        version=row.version,
        document=PaywallDocument.model_validate(row.document),
        published_by=row.published_by,
        published_at=row.published_at,
    )


def live_in_workspace(conn: Connection, *, workspace_id: str, paywall_id: str) -> list[Published]:
    """The live config of `paywall_id` in every live app of the workspace that publishes it."""
    ids = conn.execute(
        sa.select(apps.c.id).where(apps.c.workspace_id == workspace_id, apps.c.revoked_at.is_(None)).order_by(apps.c.id)
    ).scalars()
    found = [live(conn, app_id=app_id, paywall_id=paywall_id) for app_id in list(ids)]
    return [p for p in found if p is not None]
