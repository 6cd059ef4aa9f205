"""Grants whose access ends around now: what a store sync re-reads.

A store that announces changes by notification (Google Play's real-time developer
notifications) can miss one: the grant then keeps the state it had. The moment that matters is
the end of a period (a renewal extends access, an expiry ends it), so a sync re-reads the
purchases whose access ends within a window around now, from the store, and applies what it
states.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from warehouse.entitlements.tables import entitlement_grants as g


def grants_ending_between(
    conn: Connection,
    *,
    app_id: str,
    source: str,
    start: datetime,
    end: datetime,
    kinds: Sequence[str] = ("subscription",),
) -> list[Row[Any]]:
    """The app's grants of `source` (not revoked) whose `access_ends_at` is in [start, end],
    soonest first. A revoked purchase is settled: no renewal brings it back."""
    return list(
        conn.execute(
            sa.select(g)
            .where(
                g.c.app_id == app_id,
                g.c.source == source,
                g.c.kind.in_(list(kinds)),
                g.c.revoked_at.is_(None),
                g.c.access_ends_at >= start,
                g.c.access_ends_at <= end,
            )
            .order_by(g.c.access_ends_at, g.c.id)
        )
    )
