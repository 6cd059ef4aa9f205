"""The workspace's event log: the envelopes the outbox froze, for receivers that poll or reconcile.

`GET /v1/events` reads it (issue 36 part 4, preview). It lists the same bytes the webhooks carry,
newest first and Stripe-style: a page ends with `has_more`, and the next page starts after the
last event's id. It covers `RETENTION` back from now. Samples sent by POST /v1/webhooks/test are
not part of the log.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from warehouse.webhooks.tables import webhook_events as we

# How far back the log reaches: the receivers' window for reconciling after an outage (Stripe
# keeps 30 days of events too). Older rows stay in the outbox; the log does not show them.
RETENTION = timedelta(days=30)


class UnknownCursor(LookupError):
    """`starting_after` names no event of the workspace's log."""


def events_page(
    conn: Connection,
    *,
    workspace_id: str,
    now: datetime,
    since: datetime | None = None,
    event_type: str | None = None,
    limit: int = 20,
    starting_after: str | None = None,
) -> tuple[list[bytes], bool]:
    """One page of frozen envelopes (newest first, then by id) and whether more follow."""
    floor = now - RETENTION
    where = [
        we.c.workspace_id == workspace_id,
        we.c.test.is_(False),
        we.c.created_at >= (max(since, floor) if since is not None else floor),
    ]
    if event_type is not None:
        where.append(we.c.type == event_type)
    if starting_after is not None:
        cursor = conn.execute(
            sa.select(we.c.created_at, we.c.id).where(
                we.c.id == starting_after, we.c.workspace_id == workspace_id, we.c.test.is_(False)
            )
        ).first()
        if cursor is None:
            raise UnknownCursor(starting_after)
        where.append(
            sa.or_(
                we.c.created_at < cursor.created_at,
                sa.and_(we.c.created_at == cursor.created_at, we.c.id < cursor.id),
            )
        )
    rows = (
        conn.execute(
            sa.select(we.c.body).where(*where).order_by(we.c.created_at.desc(), we.c.id.desc()).limit(limit + 1)
        )
        .scalars()
        .all()
    )
    return list(rows[:limit]), len(rows) > limit
