"""Provider notifications as received: stored raw before they are acknowledged, applied once.

A notification is stored (`record`) as soon as it is verified and its tenant known, in its own
transaction, before anything is applied: if applying fails (a bug, a store unreachable), the
provider gets a 5xx and retries, and the raw bytes are still here for
`flokit admin notifications replay`. The source's own id of the notification (`dedup_key`) is
unique per workspace and provider, so a redelivery of an applied notification is acknowledged
without being applied again, and one that failed is applied on the retry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from transforms.ids import new_id
from warehouse.db import Database, utcnow
from warehouse.entitlements.tables import store_notifications as n

MAX_ERROR_CHARS = 2000


@dataclass(frozen=True)
class Stored:
    id: str
    status: str  # `applied` when this is a redelivery of one applied before
    attempts: int


@dataclass(frozen=True)
class StoredNotification:
    id: str
    provider: str
    dedup_key: str
    workspace_id: str
    app_id: str | None
    integration_id: str | None
    body: bytes
    headers: dict[str, str]
    query_string: str
    status: str
    received_at: datetime


def record(
    database: Database,
    *,
    provider: str,
    dedup_key: str,
    workspace_id: str,
    app_id: str | None,
    integration_id: str | None,
    body: bytes,
    headers: Mapping[str, str],
    query_string: str,
) -> Stored:
    """Store the notification (committed on return), or find the one stored before under the
    same key (its attempts counted)."""
    now = utcnow()
    dialect = postgresql if database.engine.dialect.name == "postgresql" else sqlite
    with database.write() as conn:
        conn.execute(
            dialect.insert(n)
            .values(
                id=new_id("ntf"),
                provider=provider,
                dedup_key=dedup_key,
                workspace_id=workspace_id,
                app_id=app_id,
                integration_id=integration_id,
                body=body,
                headers=dict(headers),
                query_string=query_string,
                status="received",
                attempts=0,
                received_at=now,
            )
            .on_conflict_do_nothing(index_elements=["workspace_id", "provider", "dedup_key"])
        )
        key = (n.c.workspace_id == workspace_id) & (n.c.provider == provider) & (n.c.dedup_key == dedup_key)
        conn.execute(sa.update(n).where(key).values(attempts=n.c.attempts + 1))
        row = conn.execute(sa.select(n.c.id, n.c.status, n.c.attempts).where(key)).one()
    return Stored(row.id, row.status, row.attempts)


def mark_applied(conn: Connection, notification_id: str) -> None:
    """In the transaction that applied it: the notification and its effects commit together."""
    conn.execute(
        sa.update(n).where(n.c.id == notification_id).values(status="applied", error=None, applied_at=utcnow())
    )


def mark_failed(database: Database, notification_id: str, error: str) -> None:
    with database.write() as conn:
        conn.execute(
            sa.update(n)
            .where(n.c.id == notification_id, n.c.status != "applied")
            .values(status="failed", error=error[:MAX_ERROR_CHARS])
        )


def stored_since(
    conn: Connection,
    *,
    provider: str,
    since: datetime,
    workspace_id: str | None = None,
    limit: int = 1000,
    after: tuple[datetime, str] | None = None,
) -> list[StoredNotification]:
    """Stored notifications of `provider` received at or after `since`, oldest first: a page of
    `limit`, continued after the last one's `(received_at, id)`."""
    query = sa.select(n).where(n.c.provider == provider, n.c.received_at >= since)
    if workspace_id is not None:
        query = query.where(n.c.workspace_id == workspace_id)
    if after is not None:
        query = query.where(sa.tuple_(n.c.received_at, n.c.id) > sa.tuple_(*after))
    rows = conn.execute(query.order_by(n.c.received_at, n.c.id).limit(limit))
    return [_stored(r) for r in rows]


def _stored(row: Any) -> StoredNotification:
    return StoredNotification(
        id=row.id,
        provider=row.provider,
        dedup_key=row.dedup_key,
        workspace_id=row.workspace_id,
        app_id=row.app_id,
        integration_id=row.integration_id,
        body=bytes(row.body),
        headers=dict(row.headers),
        query_string=row.query_string,
        status=row.status,
        received_at=row.received_at,
    )


def counts(conn: Connection, *, workspace_id: str) -> dict[str, dict[str, int]]:
    """Notifications per provider and status (what the operator checks first)."""
    rows = conn.execute(
        sa.select(n.c.provider, n.c.status, sa.func.count())
        .where(n.c.workspace_id == workspace_id)
        .group_by(n.c.provider, n.c.status)
    )
    found: dict[str, dict[str, int]] = {}
    for provider, status, count in rows:
        found.setdefault(provider, {})[status] = count
    return found
