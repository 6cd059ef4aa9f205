"""Recovery over v1 (issue 36 part 4): an endpoint's deliveries as a client reads them, a resend
of one delivery, and "recover everything not delivered since T" for an endpoint.

Both resends and recoveries only make deliveries due now, wake the listening drains
(`wake_drains`) and mark the deliveries (`resend_from`, the status to go back to if the send
fails; `transforms.webhooks.recovery`); the drain sends them as any other, with the same frozen
body, event id and delivery id, the next attempt number and a fresh signature. Such sends are
left out of the endpoint's failure streak (`delivery_queue.record_batch`): a failed resend never
disables an endpoint and a successful one does not reset its count (enabling the endpoint does
that).

Every change is one conditional UPDATE, so a drain and a resend never both own a delivery: a
delivery leased by a live run (`delivering`, lease not expired) is left alone, as its send is
under way; a pending one is made due now, replacing the retry it was waiting for (no second
send, no lost retry). A disabled endpoint's resends wait until it is enabled, as its other
deliveries do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.timefmt import iso_z
from transforms.webhooks.recovery import resend_fallback
from warehouse import audit
from warehouse.errors import Conflict, NotFound
from warehouse.webhooks.endpoints import get_endpoint
from warehouse.webhooks.tables import (
    DELIVERY_STATUSES,
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_events,
)
from warehouse.webhooks.wakeup import wake_drains


class UnknownDeliveryCursor(LookupError):
    """`starting_after` names no delivery of the endpoint."""


class SendUnderWay(Conflict):
    """A run is sending the delivery right now: its outcome will be in the history shortly."""


@dataclass(frozen=True)
class DeliveryRow:
    """One delivery as v1 lists it (the queue's status; the route names it for clients)."""

    id: str
    event_id: str
    event_type: str
    status: str
    attempts: int
    last_attempt_at: datetime | None
    response_status: int | None


def deliveries_page(
    conn: Connection,
    *,
    endpoint_id: str,
    statuses: Sequence[str] = (),
    event_type: str | None = None,
    limit: int = 20,
    starting_after: str | None = None,
) -> tuple[list[DeliveryRow], bool]:
    """One page of the endpoint's deliveries (newest first, then by id), optionally in some of
    the queue's `statuses` and of one event type, and whether more follow."""
    d, ev, a = webhook_deliveries.c, webhook_events.c, webhook_attempts.c
    where = [d.endpoint_id == endpoint_id]
    if statuses:
        where.append(d.status.in_(list(statuses)))
    if event_type is not None:
        where.append(ev.type == event_type)
    if starting_after is not None:
        cursor = conn.execute(
            sa.select(d.created_at, d.id).where(d.id == starting_after, d.endpoint_id == endpoint_id)
        ).first()
        if cursor is None:
            raise UnknownDeliveryCursor(starting_after)
        where.append(
            sa.or_(d.created_at < cursor.created_at, sa.and_(d.created_at == cursor.created_at, d.id < cursor.id))
        )
    last_attempt = sa.select(sa.func.max(a.finished_at)).where(a.delivery_id == d.id).scalar_subquery()
    rows = conn.execute(
        sa.select(
            d.id, d.event_id, ev.type, d.status, d.attempt, d.last_status_code, last_attempt.label("last_attempt_at")
        )
        .select_from(webhook_deliveries.join(webhook_events, ev.id == d.event_id))
        .where(*where)
        .order_by(d.created_at.desc(), d.id.desc())
        .limit(limit + 1)
    ).all()
    page = [
        DeliveryRow(
            id=r.id,
            event_id=r.event_id,
            event_type=r.type,
            status=r.status,
            attempts=r.attempt,
            last_attempt_at=r.last_attempt_at,
            response_status=r.last_status_code,
        )
        for r in rows[:limit]
    ]
    return page, len(rows) > limit


def _not_under_way(now: datetime) -> sa.ColumnElement[bool]:
    d = webhook_deliveries.c
    return sa.or_(d.status != "delivering", d.lease_until < now)


def _made_due(now: datetime) -> dict[str, object]:
    """The values that make a delivery due now as a resend, remembering what it falls back to
    (`transforms.webhooks.recovery.resend_fallback`, in SQL so the change stays one statement);
    a resend already waiting keeps its fallback."""
    d = webhook_deliveries.c
    fallback = sa.case(*((d.status == status, resend_fallback(status)) for status in DELIVERY_STATUSES))
    return {
        "status": "pending",
        "next_attempt_at": now,
        "lease_until": None,
        "lease_token": None,
        "resend_from": sa.func.coalesce(d.resend_from, fallback),
    }


def resend(conn: Connection, *, workspace_id: str, delivery_id: str, now: datetime, actor: str) -> str:
    """Make one delivery of the workspace due now for one more send (whatever its status); its
    endpoint id. NotFound for another workspace's delivery or a deleted endpoint's; SendUnderWay
    while a live run is sending it."""
    d = webhook_deliveries.c
    row = conn.execute(
        sa.select(d.endpoint_id, d.event_id, d.status)
        .join(webhook_endpoints, webhook_endpoints.c.id == d.endpoint_id)
        .where(
            d.id == delivery_id,
            webhook_endpoints.c.workspace_id == workspace_id,
            webhook_endpoints.c.deleted_at.is_(None),
        )
    ).first()
    if row is None:
        raise NotFound(f"No webhook delivery {delivery_id}")
    changed = conn.execute(
        webhook_deliveries.update()
        .where(d.id == delivery_id, _not_under_way(now))
        .values(**_made_due(now))
        .returning(d.resend_from)
    ).first()
    if changed is None:
        raise SendUnderWay(
            f"Webhook delivery {delivery_id} is being sent right now; its outcome appears in the endpoint's "
            "deliveries within seconds, resend it then if needed"
        )
    wake_drains(conn)  # sent within a second, by a listening drain, once this commits
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="webhook_delivery.resent",
        subject_id=delivery_id,
        detail={"endpoint_id": row.endpoint_id, "event_id": row.event_id, "status": row.status},
    )
    return str(row.endpoint_id)


def recover(
    conn: Connection, *, workspace_id: str, endpoint_id: str, since: datetime, now: datetime, actor: str
) -> list[str]:
    """Make due now, once, every delivery to the endpoint of an event created at or after
    `since` that was not delivered: failed for good, or waiting (a retry, never attempted, queued
    while the endpoint was disabled). Returns their ids, oldest event first.

    Idempotent: a delivery already waiting for a resend or recovery is left as it is, so a repeat
    while they are still due changes nothing; one under way is skipped (it is being sent); test
    samples are not recovered (they are sent now or never). NotFound for another workspace's
    endpoint."""
    get_endpoint(conn, workspace_id=workspace_id, endpoint_id=endpoint_id)
    d, ev = webhook_deliveries.c, webhook_events.c
    events_since = sa.select(ev.id).where(ev.workspace_id == workspace_id, ev.created_at >= since, ev.test.is_(False))
    recovered = conn.execute(
        webhook_deliveries.update()
        .where(
            d.endpoint_id == endpoint_id,
            d.event_id.in_(events_since),
            d.status != "succeeded",
            d.resend_from.is_(None),
            _not_under_way(now),
        )
        .values(**_made_due(now))
        .returning(d.id, d.created_at)
    ).all()
    ids = [r.id for r in sorted(recovered, key=lambda r: (r.created_at, r.id))]
    if ids:
        wake_drains(conn)
    audit.record(
        conn,
        workspace_id=workspace_id,
        actor=actor,
        action="webhook_endpoint.recovered",
        subject_id=endpoint_id,
        detail={"since": iso_z(since), "deliveries": len(ids)},
    )
    return ids
