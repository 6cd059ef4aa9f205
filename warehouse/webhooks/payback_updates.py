"""`report.payback_updated`: announce, once, every change of a workspace's published payback rows.

After a publish, the live store's digests (`warehouse.reports.serving.payback_digests`) are
compared with those the workspace was last notified of (`payback_notified_digests`). For a
workspace whose digests differ, ONE transaction emits the event into the outbox and records the
live digests as notified: the event exists exactly when its digests are recorded. A crash after
the store was swapped in and before that transaction leaves the difference in place, so the next
comparison announces it (with the store live then); a second comparison of the same store finds
nothing, so nothing is announced twice.

Steady state costs one read transaction: the write transactions (and on SQLite the writer lock
ingest also waits for) are taken only for the workspaces that changed. Inside each, the
workspace row is locked and the notified digests read again, so two comparisons running at once
(a manual refresh during a scheduled one) cannot both emit. A workspace the store knows and the
database does not (deleted, or a lake seeded without one) has nobody to notify and is skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.webhooks import payloads
from transforms.webhooks.payback_changes import CohortChange, changed_cohorts
from warehouse.db import Database, utcnow
from warehouse.reports.serving import PaybackDigests
from warehouse.reports.tables import payback_notified_digests
from warehouse.tables import workspaces
from warehouse.webhooks.outbox import emit_event

EVENT_TYPE = "report.payback_updated"


@dataclass(frozen=True)
class PaybackUpdate:
    workspace_id: str
    event_id: str
    change: CohortChange


def notify_payback_updates(
    db: Database, published: PaybackDigests | None, *, now: datetime | None = None
) -> list[PaybackUpdate]:
    """Emit one `report.payback_updated` per workspace whose published payback rows differ from
    what it was last notified of; returns what was emitted (nothing when nothing changed)."""
    if published is None:
        return []
    updates = []
    for workspace_id in unannounced(db, published):
        live = published.by_workspace.get(workspace_id, {})
        with db.write() as conn:
            update = _notify(conn, workspace_id, live, published.generated_at, now or utcnow())
        if update is not None:
            updates.append(update)
    return updates


def unannounced(db: Database, published: PaybackDigests) -> list[str]:
    """The workspaces whose published payback rows differ from what they were last notified of
    (one read transaction; a workspace unknown to the database is listed and skipped later)."""
    with db.read() as conn:
        notified = _notified(conn, None)
    return sorted(
        ws
        for ws in published.by_workspace.keys() | notified.keys()
        if changed_cohorts(published.by_workspace.get(ws, {}), notified.get(ws, {})) is not None
    )


def _notify(
    conn: Connection, workspace_id: str, live: dict[date, str], refreshed_at: datetime, now: datetime
) -> PaybackUpdate | None:
    locked = conn.execute(sa.select(workspaces.c.id).where(workspaces.c.id == workspace_id).with_for_update()).first()
    if locked is None:
        return None
    change = changed_cohorts(live, _notified(conn, workspace_id).get(workspace_id, {}))
    if change is None:  # announced meanwhile by a comparison running at the same time
        return None
    event_id = emit_event(
        conn,
        workspace_id=workspace_id,
        event_type=EVENT_TYPE,
        data=payloads.payback_updated(refreshed_at=refreshed_at, cohort_start=change.start, cohort_end=change.end),
        now=now,
    )
    d = payback_notified_digests.c
    conn.execute(
        payback_notified_digests.delete().where(d.workspace_id == workspace_id, d.cohort_date.in_(change.days))
    )
    rows = [
        {"workspace_id": workspace_id, "cohort_date": day, "digest": live[day], "notified_at": now}
        for day in change.days
        if day in live
    ]
    if rows:
        conn.execute(payback_notified_digests.insert(), rows)
    return PaybackUpdate(workspace_id=workspace_id, event_id=event_id, change=change)


def _notified(conn: Connection, workspace_id: str | None) -> dict[str, dict[date, str]]:
    d = payback_notified_digests.c
    query = sa.select(d.workspace_id, d.cohort_date, d.digest)
    if workspace_id is not None:
        query = query.where(d.workspace_id == workspace_id)
    out: dict[str, dict[date, str]] = {}
    for row in conn.execute(query):
        out.setdefault(row.workspace_id, {})[row.cohort_date] = row.digest
    return out
