"""Entitlements: recorded from receipt verifications, read on the gateway's hot path."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from warehouse.db import utcnow
from warehouse.paywalls.entitlement_tables import entitlements
from warehouse.tables import apps

SOURCE_IAP = "iap"  # in-app purchase, verified with the store
SOURCE_NONE = "none"  # nothing verified for this user


@dataclass(frozen=True)
class Entitlement:
    active: bool
    source: str


def record(
    conn: Connection,
    *,
    workspace_id: str,
    app_id: str,
    user_id: str,
    active: bool,
    provider: str,
    product_id: str | None,
) -> None:
    """The user's entitlement as this verification says (one atomic upsert: concurrent
    verifications of one user leave one row, the last one's)."""
    values = {
        "app_id": app_id,
        "user_id": user_id,
        "workspace_id": workspace_id,
        "active": active,
        "source": SOURCE_IAP,
        "provider": provider,
        "product_id": product_id,
        "verified_at": utcnow(),
    }
    insert = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(entitlements).values(**values)
    changed = {k: insert.excluded[k] for k in ("active", "source", "provider", "product_id", "verified_at")}
    conn.execute(insert.on_conflict_do_update(index_elements=["app_id", "user_id"], set_=changed))


def current(conn: Connection, *, workspace_id: str, app_id: str, user_id: str) -> Entitlement:
    """The user's entitlement in the workspace's app (another workspace's app has none here)."""
    row = conn.execute(
        sa.select(entitlements.c.active, entitlements.c.source).where(
            entitlements.c.workspace_id == workspace_id,
            entitlements.c.app_id == app_id,
            entitlements.c.user_id == user_id,
        )
    ).first()
    return Entitlement(active=False, source=SOURCE_NONE) if row is None else Entitlement(row.active, row.source)


def current_for_key(conn: Connection, *, publishable_key: str, user_id: str) -> Entitlement | None:
    """The entitlement of the user in the app of this key, in ONE query (the read hot path:
    resolving the key first would be a second round trip); None when the key is unknown or
    revoked."""
    row = conn.execute(
        sa.select(entitlements.c.active, entitlements.c.source)
        .select_from(apps)
        .outerjoin(entitlements, (entitlements.c.app_id == apps.c.id) & (entitlements.c.user_id == user_id))
        .where(apps.c.publishable_key == publishable_key, apps.c.revoked_at.is_(None))
    ).first()
    if row is None:
        return None
    if row.active is None:
        return Entitlement(active=False, source=SOURCE_NONE)
    return Entitlement(row.active, row.source)
