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


@dataclass(frozen=True)
class Received:
    """A verified notification as it arrived, and who it is for. `headers` and `query_string` are
    only what replay reads of them (`api.notifications.framework.kept_for_replay`): never the
    credential that authenticated it, which this table must not hold (migration 0190)."""

    provider: str
    dedup_key: str
    workspace_id: str
    app_id: str | None
    integration_id: str | None
    body: bytes
    headers: Mapping[str, str]
    query_string: str


def store(conn: Connection, received: Received) -> Stored:
    """In the caller's transaction: store the notification, or find the one stored before under
    the same key, locked (its attempts counted)."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(
        dialect.insert(n)
        .values(
            id=new_id("ntf"),
            provider=received.provider,
            dedup_key=received.dedup_key,
            workspace_id=received.workspace_id,
            app_id=received.app_id,
            integration_id=received.integration_id,
            body=received.body,
            headers=dict(received.headers),
            query_string=received.query_string,
            status="received",
            attempts=0,
            received_at=utcnow(),
        )
        .on_conflict_do_nothing(index_elements=["workspace_id", "provider", "dedup_key"])
    )
    key = (
        (n.c.workspace_id == received.workspace_id)
        & (n.c.provider == received.provider)
        & (n.c.dedup_key == received.dedup_key)
    )
    conn.execute(sa.update(n).where(key).values(attempts=n.c.attempts + 1))
    row = conn.execute(sa.select(n.c.id, n.c.status, n.c.attempts).where(key).with_for_update()).one()
    return Stored(row.id, row.status, row.attempts)


def applied_id(conn: Connection, *, workspace_id: str, provider: str, dedup_key: str) -> str | None:
    """The id of the notification stored under this key if it was applied, else None (a cheap
    read that spares a redelivery all other work)."""
    found: str | None = conn.execute(
        sa.select(n.c.id).where(
            n.c.workspace_id == workspace_id,
            n.c.provider == provider,
            n.c.dedup_key == dedup_key,
            n.c.status == "applied",
        )
    ).scalar()
    return found


def record_failure(database: Database, received: Received, error: str) -> str:
    """Store the notification (if it was not) and say why applying it failed: committed on
    return, so the raw bytes wait for the provider's retry or a replay. Its id."""
    with database.write() as conn:
        stored = store(conn, received)
        if stored.status != "applied":
            conn.execute(sa.update(n).where(n.c.id == stored.id).values(status="failed", error=error[:MAX_ERROR_CHARS]))
    return stored.id


def mark_applied(conn: Connection, notification_id: str, *, user_id: str | None = None) -> None:
    """In the transaction that applied it: the notification and its effects commit together.
    `user_id`: whose purchase it changed, what a customer's timeline finds it by."""
    conn.execute(
        sa.update(n)
        .where(n.c.id == notification_id)
        .values(status="applied", error=None, applied_at=utcnow(), user_id=user_id)
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
    workspace_id: str,
    limit: int = 1000,
    after: tuple[datetime, str] | None = None,
) -> list[StoredNotification]:
    """The workspace's stored notifications of `provider` received at or after `since`, oldest
    first: a page of `limit`, continued after the last one's `(received_at, id)`."""
    query = sa.select(n).where(n.c.provider == provider, n.c.received_at >= since, n.c.workspace_id == workspace_id)
    return _page(conn, query, limit=limit, after=after)


def stored_since_for_operator(
    conn: Connection,
    *,
    provider: str,
    since: datetime,
    limit: int = 1000,
    after: tuple[datetime, str] | None = None,
) -> list[StoredNotification]:
    """`stored_since` across every workspace: for the operator's replay of a whole provider."""
    query = sa.select(n).where(n.c.provider == provider, n.c.received_at >= since)
    return _page(conn, query, limit=limit, after=after)


def _page(
    conn: Connection, query: sa.Select, *, limit: int, after: tuple[datetime, str] | None
) -> list[StoredNotification]:
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
