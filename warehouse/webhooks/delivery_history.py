"""The webhook delivery history: what was sent to an endpoint, read for the CLI and the dashboard.

A read model over the lease queue's tables (`delivery_queue.py` writes them): each delivery with
its sends in order. The CLI's `webhooks deliveries --json` has the brief shape (it predates the
dashboard); the dashboard's pages add each send's response excerpt and duration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.timefmt import iso_z
from warehouse.errors import NotFound
from warehouse.webhooks.tables import webhook_attempts, webhook_deliveries, webhook_events


@dataclass(frozen=True)
class Send:
    """One attempt to send a delivery, as the CLI's history lists it (its --json shape)."""

    attempt: int
    status_code: int | None
    error: str | None
    started_at: str | None
    finished_at: str | None


@dataclass(frozen=True)
class SendDetail(Send):
    """One attempt as the dashboard shows it: also the start of the receiver's answer and how long it took."""

    response_excerpt: str | None
    duration_ms: int


@dataclass(frozen=True)
class Delivery:
    """One delivery of an event to the endpoint, with its sends in order (times as ISO 8601 Z)."""

    delivery_id: str
    event_id: str
    event_type: str
    test: bool
    status: str
    attempt: int
    status_code: int | None
    error: str | None
    created_at: str | None
    next_attempt_at: str | None  # only while pending
    completed_at: str | None
    attempts: tuple[Send, ...]


@dataclass(frozen=True)
class DeliveryDetail(Delivery):
    """A delivery with the event's frozen body: the exact bytes signed and sent, as text."""

    body: str


def history(conn: Connection, *, endpoint_id: str, limit: int = 100) -> list[Delivery]:
    """The endpoint's latest deliveries, newest first, each with its sends in order (`Send`: the
    CLI history's shape, which predates the dashboard's)."""
    d, ev = webhook_deliveries.c, webhook_events.c
    rows = conn.execute(
        sa.select(webhook_deliveries, ev.type.label("event_type"), ev.test)
        .join(webhook_events, ev.id == d.event_id)
        .where(d.endpoint_id == endpoint_id)
        .order_by(d.created_at.desc(), d.id.desc())
        .limit(limit)
    ).all()
    attempts = _attempts(conn, [r.id for r in rows], brief=True)
    return [Delivery(**_delivery(r), attempts=tuple(attempts.get(r.id, []))) for r in rows]


def _attempts(conn: Connection, delivery_ids: Sequence[str], *, brief: bool = False) -> dict[str, list[Send]]:
    """Each delivery's sends in order: `Send` if `brief`, else `SendDetail`."""
    out: dict[str, list[Send]] = {}
    if not delivery_ids:
        return out
    a = webhook_attempts.c
    for r in conn.execute(sa.select(webhook_attempts).where(a.delivery_id.in_(list(delivery_ids))).order_by(a.id)):
        times = (r.attempt, r.status_code, r.error, iso_z(r.started_at), iso_z(r.finished_at))
        send = (
            Send(*times)
            if brief
            else SendDetail(
                *times,
                response_excerpt=r.response_excerpt,
                duration_ms=round((r.finished_at - r.started_at).total_seconds() * 1000),
            )
        )
        out.setdefault(r.delivery_id, []).append(send)
    return out


def _delivery(r: Any) -> dict[str, Any]:
    """A delivery row's fields, but its sends."""
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
    }


def page_of_deliveries(
    conn: Connection,
    *,
    endpoint_id: str,
    status: str | None = None,
    event_type: str | None = None,
    limit: int = 25,
    offset: int = 0,
) -> tuple[list[Delivery], int]:
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
    return [Delivery(**_delivery(r), attempts=tuple(attempts.get(r.id, []))) for r in rows], total


def delivery_detail(conn: Connection, *, endpoint_id: str, delivery_id: str) -> DeliveryDetail:
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
    return DeliveryDetail(
        **_delivery(row),
        attempts=tuple(_attempts(conn, [row.id]).get(row.id, [])),
        body=bytes(row.body).decode("utf-8", errors="replace"),
    )
