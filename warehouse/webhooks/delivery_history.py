"""The webhook delivery history: what was sent to an endpoint, read for the CLI and the dashboard.

A read model over the lease queue's tables (`delivery_queue.py` writes them): each delivery with
its sends in order. The CLI's `webhooks deliveries --json` has the brief shape (it predates the
dashboard); the dashboard's pages add each send's response excerpt and duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.timefmt import iso_z
from warehouse.errors import NotFound
from warehouse.webhooks.tables import webhook_attempts, webhook_deliveries, webhook_events


def history(conn: Connection, *, endpoint_id: str, limit: int = 100) -> list[dict[str, Any]]:
    """The endpoint's latest deliveries, newest first, each with its sends in order."""
    d, ev = webhook_deliveries.c, webhook_events.c
    rows = conn.execute(
        sa.select(webhook_deliveries, ev.type.label("event_type"), ev.test)
        .join(webhook_events, ev.id == d.event_id)
        .where(d.endpoint_id == endpoint_id)
        .order_by(d.created_at.desc(), d.id.desc())
        .limit(limit)
    ).all()
    attempts = _attempts(conn, [r.id for r in rows], brief=True)
    return [_delivery(r, attempts.get(r.id, [])) for r in rows]


def _attempts(conn: Connection, delivery_ids: Sequence[str], *, brief: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Each delivery's sends in order. `brief` is the CLI history's shape (its --json output
    predates the dashboard); otherwise each send also has the response excerpt and its duration."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not delivery_ids:
        return out
    a = webhook_attempts.c
    for r in conn.execute(sa.select(webhook_attempts).where(a.delivery_id.in_(list(delivery_ids))).order_by(a.id)):
        send: dict[str, Any] = {
            "attempt": r.attempt,
            "status_code": r.status_code,
            "error": r.error,
            "started_at": iso_z(r.started_at),
            "finished_at": iso_z(r.finished_at),
        }
        if not brief:
            send["response_excerpt"] = r.response_excerpt
            send["duration_ms"] = round((r.finished_at - r.started_at).total_seconds() * 1000)
        out.setdefault(r.delivery_id, []).append(send)
    return out


def _delivery(r: Any, attempts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "delivery_id": r.id,
        "event_id": r.event_id,
        "event_type": r.event_type,
        "test": bool(r.test),
        "status": r.status,
        "attempt": r.attempt,
        "status_code": r.last_status_code,
        "error": r.last_error,
        "created_at": iso_z(r.created_at),
        "next_attempt_at": iso_z(r.next_attempt_at) if r.status == "pending" else None,
        "completed_at": iso_z(r.completed_at),
        "attempts": attempts,
    }


def page_of_deliveries(
    conn: Connection,
    *,
    endpoint_id: str,
    status: str | None = None,
    event_type: str | None = None,
    limit: int = 25,
    offset: int = 0,
) -> tuple[list[dict[str, Any]], int]:
    """One page of the endpoint's deliveries, newest first, optionally of one status and event
    type, with how many match in all (the dashboard's history, paged like v1's lists)."""
    d, ev = webhook_deliveries.c, webhook_events.c
    where = [d.endpoint_id == endpoint_id]
    if status is not None:
        where.append(d.status == status)
    if event_type is not None:
        where.append(ev.type == event_type)
    joined = webhook_deliveries.join(webhook_events, ev.id == d.event_id)
    total = conn.execute(sa.select(sa.func.count()).select_from(joined).where(*where)).scalar_one()
    rows = conn.execute(
        sa.select(webhook_deliveries, ev.type.label("event_type"), ev.test)
        .select_from(joined)
        .where(*where)
        .order_by(d.created_at.desc(), d.id.desc())
        .limit(limit)
        .offset(offset)
    ).all()
    attempts = _attempts(conn, [r.id for r in rows])
    return [_delivery(r, attempts.get(r.id, [])) for r in rows], total


def delivery_detail(conn: Connection, *, endpoint_id: str, delivery_id: str) -> dict[str, Any]:
    """One delivery of the endpoint with every send and the event's frozen body (the exact bytes
    signed and sent, as text). Another endpoint's delivery is NotFound, as an unknown one."""
    d, ev = webhook_deliveries.c, webhook_events.c
    row = conn.execute(
        sa.select(webhook_deliveries, ev.type.label("event_type"), ev.test, ev.body)
        .join(webhook_events, ev.id == d.event_id)
        .where(d.id == delivery_id, d.endpoint_id == endpoint_id)
    ).first()
    if row is None:
        raise NotFound(f"No delivery {delivery_id} to endpoint {endpoint_id}")
    found = _delivery(row, _attempts(conn, [row.id]).get(row.id, []))
    found["body"] = bytes(row.body).decode("utf-8", errors="replace")
    return found
