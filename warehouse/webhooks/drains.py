"""The long-lived drain runs' slots: heartbeats written by the runs, read by the webhook sensor.

Each row is one slot (`a`, `b`): the run that holds it, its last beat and its planned end. A
run beats every few seconds from a thread while it lives, and ends its row when it exits
cleanly (`ends_at` set to now), so that the sensor relaunches the slot at its next tick rather
than after the beat goes stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from warehouse.webhooks.tables import webhook_drains


@dataclass(frozen=True)
class DrainSlot:
    slot: str
    run_id: str
    beat_at: datetime
    ends_at: datetime

    def alive(self, now: datetime, stale_after_s: float) -> bool:
        """Beating recently and not past its planned end."""
        return self.ends_at > now and (now - self.beat_at).total_seconds() < stale_after_s


def beat(conn: Connection, *, slot: str, run_id: str, now: datetime, ends_at: datetime) -> None:
    """Record that `run_id` holds `slot` and lives at `now` (an update, else the first insert)."""
    d = webhook_drains.c
    updated = conn.execute(
        webhook_drains.update().where(d.slot == slot).values(run_id=run_id, beat_at=now, ends_at=ends_at)
    ).rowcount
    if not updated:
        conn.execute(webhook_drains.insert().values(slot=slot, run_id=run_id, beat_at=now, ends_at=ends_at))


def end(conn: Connection, *, slot: str, run_id: str, now: datetime) -> None:
    """The run leaves its slot (if still its own): the sensor may relaunch it at once."""
    d = webhook_drains.c
    conn.execute(webhook_drains.update().where(d.slot == slot, d.run_id == run_id).values(ends_at=now))


def slots(conn: Connection) -> dict[str, DrainSlot]:
    rows = conn.execute(sa.select(webhook_drains)).all()
    return {r.slot: DrainSlot(r.slot, r.run_id, r.beat_at, r.ends_at) for r in rows}
