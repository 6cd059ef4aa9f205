"""The outbox: every producer of webhook events calls `emit_event` inside its own transaction.

The envelope is frozen to bytes once, here, and one delivery row is queued per endpoint of the
workspace subscribed to the event type, all in the caller's transaction: the event exists
exactly when the change that caused it commits (no event for a rolled-back approval, no
approval without its event). The commit wakes the drains (`wakeup.wake_drains`).

A disabled endpoint gets its deliveries queued too: they wait, unsent, until it is enabled
again (spec: "temporarily disabled until re-enabled"), so no event vanishes for an endpoint
that was down for a while. Test samples go only to enabled endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.ids import new_id
from transforms.webhooks.envelope import check_event_type, envelope, freeze
from transforms.webhooks.payloads import SAMPLE_DATA
from warehouse.db import utcnow
from warehouse.webhooks.tables import webhook_deliveries, webhook_endpoints, webhook_events
from warehouse.webhooks.wakeup import wake_drains


@dataclass(frozen=True)
class Emitted:
    event_id: str
    deliveries: tuple[tuple[str, str], ...]  # (delivery_id, endpoint_id)


def emit_event(
    conn: Connection,
    *,
    workspace_id: str,
    event_type: str,
    data: Mapping[str, object],
    now: datetime | None = None,
    except_endpoint: str | None = None,
) -> str:
    """Record an event and queue its deliveries in the caller's transaction; return the event id.

    An event with no subscribed endpoint is still recorded (cheap, and the id is stable for the
    producer's own logs). `except_endpoint` is left out (an endpoint is not told of its own
    disabling)."""
    return _emit(
        conn, workspace_id=workspace_id, event_type=event_type, data=data, now=now, except_endpoint=except_endpoint
    ).event_id


def emit_test_event(conn: Connection, *, workspace_id: str, event_type: str, endpoint_id: str | None = None) -> Emitted:
    """A sample event (`"test": true`) for POST /v1/webhooks/test: to every enabled endpoint
    subscribed to the type, or to exactly `endpoint_id` (enabled, subscribed or not)."""
    return _emit(
        conn,
        workspace_id=workspace_id,
        event_type=event_type,
        data=SAMPLE_DATA[check_event_type(event_type)],
        test=True,
        only_endpoint=endpoint_id,
    )


def _targets(
    conn: Connection,
    workspace_id: str,
    event_type: str,
    *,
    test: bool,
    only_endpoint: str | None,
    except_endpoint: str | None,
) -> list[str]:
    """Test samples are sent now or never: only enabled endpoints, and `only_endpoint` whether
    subscribed or not. Events go to every subscribed endpoint, enabled or waiting to be."""
    e = webhook_endpoints.c
    query = sa.select(e.id, e.events).where(e.workspace_id == workspace_id).order_by(e.id)
    if test:
        query = query.where(e.status == "enabled")
    if only_endpoint is not None:
        return [r.id for r in conn.execute(query.where(e.id == only_endpoint))]
    if except_endpoint is not None:
        query = query.where(e.id != except_endpoint)
    # Endpoints per workspace are few; filtering the JSON list here keeps one portable query.
    return [r.id for r in conn.execute(query) if event_type in r.events]


def _emit(
    conn: Connection,
    *,
    workspace_id: str,
    event_type: str,
    data: Mapping[str, object],
    now: datetime | None = None,
    test: bool = False,
    only_endpoint: str | None = None,
    except_endpoint: str | None = None,
) -> Emitted:
    now = now or utcnow()
    event_id = new_id("evt")
    body = freeze(
        envelope(
            event_id=event_id, event_type=event_type, created_at=now, workspace_id=workspace_id, data=data, test=test
        )
    )
    conn.execute(
        webhook_events.insert().values(
            id=event_id, workspace_id=workspace_id, type=event_type, body=body, test=test, created_at=now
        )
    )
    deliveries = tuple(
        (new_id("dlv"), endpoint_id)
        for endpoint_id in _targets(
            conn,
            workspace_id,
            event_type,
            test=test,
            only_endpoint=only_endpoint,
            except_endpoint=except_endpoint,
        )
    )
    if deliveries:
        conn.execute(
            webhook_deliveries.insert(),
            [
                {
                    "id": delivery_id,
                    "event_id": event_id,
                    "endpoint_id": endpoint_id,
                    "workspace_id": workspace_id,
                    "status": "pending",
                    "attempt": 0,
                    "next_attempt_at": now,
                    "claims": 0,
                    "created_at": now,
                }
                for delivery_id, endpoint_id in deliveries
            ],
        )
        wake_drains(conn)  # due now: the listening drains claim them at this commit
    return Emitted(event_id=event_id, deliveries=deliveries)
