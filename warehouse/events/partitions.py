"""What the lake holds of one UTC day, seen from `landed_events`."""

from __future__ import annotations

from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from warehouse.events.tables import landed_events


def in_lake_count(conn: Connection, day: date) -> int:
    """Landed rows of the day already marked as written to the lake (by any run)."""
    return conn.execute(
        sa.select(sa.func.count())
        .select_from(landed_events)
        .where(landed_events.c.day == day.isoformat(), landed_events.c.in_lake == sa.true())
    ).scalar_one()
