"""The audit log: who did what to which object, written in the same transaction as the change."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from warehouse.db import utcnow
from warehouse.tables import audit_log


def record(
    conn: Connection,
    *,
    workspace_id: str,
    actor: str,
    action: str,
    subject_id: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        audit_log.insert().values(
            workspace_id=workspace_id,
            actor=actor,
            action=action,
            subject_id=subject_id,
            detail=detail or {},
            created_at=utcnow(),
        )
    )


def entries(conn: Connection, *, workspace_id: str, subject_id: str | None = None) -> list[dict[str, Any]]:
    query = audit_log.select().where(audit_log.c.workspace_id == workspace_id)
    if subject_id is not None:
        query = query.where(audit_log.c.subject_id == subject_id)
    return [dict(r._mapping) for r in conn.execute(query.order_by(audit_log.c.id))]
