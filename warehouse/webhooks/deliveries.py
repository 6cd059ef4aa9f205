"""The delivery queue: find due work, claim it safely, record each send, show the history.

Claims are one `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING`: on
PostgreSQL concurrent runs skip each other's rows; on SQLite the statement runs inside
`BEGIN IMMEDIATE` (`db.write()`), which serializes writers, and SQLAlchemy drops the FOR UPDATE.
A claim is a lease: a run that dies leaves rows `delivering` until `lease_until`, then they are
due again. Results are written only by the lease holder (`lease_token` must match).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.ids import new_id
from transforms.timefmt import iso_z
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES, next_attempt_at
from warehouse.webhooks.endpoints import signing_secrets
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_attempts, webhook_deliveries, webhook_endpoints, webhook_events

_ERROR_CHARS = 500
# Rows the sensor looks at to fingerprint the due set (enough to notice any change at the head).
_FINGERPRINT_ROWS = 1000


@dataclass(frozen=True)
class Claimed:
    """One delivery leased for one send."""

    delivery_id: str
    event_id: str
    endpoint_id: str
    workspace_id: str
    attempt: int  # the number of the send about to happen (1-based)
    url: str
    body: bytes
    secrets: tuple[str, ...]
    standard_webhooks: bool
    lease_token: str


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    error: str | None
    started_at: datetime
    finished_at: datetime

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


@dataclass(frozen=True)
class Recorded:
    delivery_id: str
    status: str  # succeeded | pending (retry scheduled) | failed (exhausted) | lost (lease expired)
    endpoint_disabled: bool = False
    integration_error_event_id: str | None = None


def _due(now: datetime) -> Any:
    d = webhook_deliveries.c
    return sa.or_(
        sa.and_(d.status == "pending", d.next_attempt_at <= now),
        sa.and_(d.status == "delivering", d.lease_until < now),
    )


def _due_query(now: datetime) -> sa.Select:
    d, e = webhook_deliveries.c, webhook_endpoints.c
    return (
        sa.select(d.id)
        .select_from(webhook_deliveries.join(webhook_endpoints, e.id == d.endpoint_id))
        .where(_due(now), e.status == "enabled")
    )


def due_fingerprint(conn: Connection, now: datetime) -> tuple[int, str | None]:
    """How many deliveries are due (up to 1000 looked at) and a digest of which, at which
    attempt and claim count: the sensor's run key. It changes when anything due changes,
    including a crashed run's rows coming back after their lease."""
    d = webhook_deliveries.c
    rows = conn.execute(
        _due_query(now).add_columns(d.attempt, d.claims).order_by(d.next_attempt_at, d.id).limit(_FINGERPRINT_ROWS)
    ).all()
    if not rows:
        return 0, None
    digest = hashlib.sha256("|".join(f"{r.id}:{r.attempt}:{r.claims}" for r in rows).encode()).hexdigest()
    return len(rows), digest[:24]


def claim(conn: Connection, *, now: datetime, limit: int, lease: timedelta) -> list[Claimed]:
    """Lease up to `limit` due deliveries of enabled endpoints, oldest due first."""
    d = webhook_deliveries.c
    token = new_id("req")
    picked = (
        _due_query(now)
        .order_by(d.next_attempt_at, d.id)
        .limit(limit)
        .with_for_update(skip_locked=True, of=webhook_deliveries)
        .scalar_subquery()
    )
    rows = conn.execute(
        webhook_deliveries.update()
        .where(d.id.in_(picked))
        .values(status="delivering", lease_until=now + lease, lease_token=token, claims=d.claims + 1)
        .returning(d.id, d.event_id, d.endpoint_id, d.workspace_id, d.attempt)
    ).all()
    if not rows:
        return []
    bodies = dict(
        conn.execute(
            sa.select(webhook_events.c.id, webhook_events.c.body).where(
                webhook_events.c.id.in_({r.event_id for r in rows})
            )
        ).all()
    )
    endpoints = {
        r.id: r
        for r in conn.execute(
            sa.select(webhook_endpoints.c.id, webhook_endpoints.c.url, webhook_endpoints.c.standard_webhooks).where(
                webhook_endpoints.c.id.in_({r.endpoint_id for r in rows})
            )
        )
    }
    secrets = signing_secrets(conn, endpoints, now)
    return [
        Claimed(
            delivery_id=r.id,
            event_id=r.event_id,
            endpoint_id=r.endpoint_id,
            workspace_id=r.workspace_id,
            attempt=r.attempt + 1,
            url=endpoints[r.endpoint_id].url,
            body=bytes(bodies[r.event_id]),
            secrets=tuple(secrets[r.endpoint_id]),
            standard_webhooks=bool(endpoints[r.endpoint_id].standard_webhooks),
            lease_token=token,
        )
        for r in sorted(rows, key=lambda r: r.id)
    ]


def record(conn: Connection, claimed: Claimed, result: SendResult, *, backoff_scale: float = 1.0) -> Recorded:
    """Write one send's outcome (see `record_batch`)."""
    return record_batch(conn, [(claimed, result)], backoff_scale=backoff_scale)[0]


def record_batch(
    conn: Connection, sends: Sequence[tuple[Claimed, SendResult]], *, backoff_scale: float = 1.0
) -> list[Recorded]:
    """Write a round of sends in the caller's transaction: every attempt row, each delivery's
    next state, the endpoints' failure streaks, and on an endpoint's fifth consecutive failure
    its disabling with an `integration.error` event to the workspace's other enabled endpoints.

    Successes (the common case) are written with a few set-based statements per round, not per
    send, which matters on PostgreSQL where every statement is a round trip. Within a round,
    successes are applied before failures, so a round's failures always count toward the streak.
    Outcomes come back in the order of `sends`."""
    if not sends:
        return []
    conn.execute(
        webhook_attempts.insert(),
        [
            {
                "delivery_id": c.delivery_id,
                "attempt": c.attempt,
                "status_code": r.status_code,
                "error": _error(r),
                "started_at": r.started_at,
                "finished_at": r.finished_at,
            }
            for c, r in sends
        ],
    )
    outcomes: dict[str, Recorded] = {}
    groups: dict[tuple[str, int | None], list[tuple[Claimed, SendResult]]] = {}
    for c, r in sends:
        if r.ok:
            groups.setdefault((c.lease_token, r.status_code), []).append((c, r))
    d, e = webhook_deliveries.c, webhook_endpoints.c
    succeeded_endpoints: set[str] = set()
    for (token, status_code), items in groups.items():
        by_id = {c.delivery_id: c for c, _ in items}
        held = set(
            conn.execute(
                webhook_deliveries.update()
                .where(d.id.in_(list(by_id)), d.lease_token == token, d.status == "delivering")
                .values(
                    status="succeeded",
                    attempt=d.attempt + 1,
                    next_attempt_at=None,
                    lease_until=None,
                    lease_token=None,
                    last_status_code=status_code,
                    last_error=None,
                    completed_at=max(r.finished_at for _, r in items),
                )
                .returning(d.id)
            ).scalars()
        )
        for delivery_id, c in by_id.items():
            # Not held: our lease expired and another run took the row over; it records its own send.
            outcomes[delivery_id] = Recorded(delivery_id, "succeeded" if delivery_id in held else "lost")
            if delivery_id in held:
                succeeded_endpoints.add(c.endpoint_id)
    if succeeded_endpoints:
        conn.execute(
            webhook_endpoints.update().where(e.id.in_(sorted(succeeded_endpoints))).values(consecutive_failures=0)
        )
    for c, r in sends:
        if not r.ok:
            outcomes[c.delivery_id] = _record_failure(conn, c, r, backoff_scale)
    return [outcomes[c.delivery_id] for c, _ in sends]


def _error(result: SendResult) -> str | None:
    return None if result.error is None else result.error[:_ERROR_CHARS]


def _record_failure(conn: Connection, claimed: Claimed, result: SendResult, backoff_scale: float) -> Recorded:
    d, e = webhook_deliveries.c, webhook_endpoints.c
    now = result.finished_at
    error = _error(result)
    retry_at = next_attempt_at(claimed.attempt, now, backoff_scale)
    status = "pending" if retry_at is not None else "failed"
    held = conn.execute(
        webhook_deliveries.update()
        .where(d.id == claimed.delivery_id, d.lease_token == claimed.lease_token, d.status == "delivering")
        .values(
            status=status,
            attempt=claimed.attempt,
            next_attempt_at=retry_at,
            lease_until=None,
            lease_token=None,
            last_status_code=result.status_code,
            last_error=error,
            completed_at=None if status == "pending" else now,
        )
        .returning(d.id)
    ).first()
    if held is None:
        return Recorded(claimed.delivery_id, "lost")
    streak = conn.execute(
        webhook_endpoints.update()
        .where(e.id == claimed.endpoint_id)
        .values(consecutive_failures=e.consecutive_failures + 1)
        .returning(e.consecutive_failures)
    ).scalar_one()
    if streak < DISABLE_AFTER_FAILURES:
        return Recorded(claimed.delivery_id, status)
    disabled = conn.execute(
        webhook_endpoints.update()
        .where(e.id == claimed.endpoint_id, e.status == "enabled")
        .values(status="disabled", disabled_at=now)
        .returning(e.url)
    ).first()
    if disabled is None:  # already disabled by a concurrent recorder or the operator
        return Recorded(claimed.delivery_id, status)
    event_id = emit_event(
        conn,
        workspace_id=claimed.workspace_id,
        event_type="integration.error",
        data={
            "reason": "webhook_endpoint_disabled",
            "endpoint_id": claimed.endpoint_id,
            "url": disabled.url,
            "consecutive_failures": streak,
            "last_status_code": result.status_code,
            "last_error": error,
        },
        now=now,
    )
    return Recorded(claimed.delivery_id, status, endpoint_disabled=True, integration_error_event_id=event_id)


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
    attempts: dict[str, list[dict[str, Any]]] = {}
    if rows:
        a = webhook_attempts.c
        for r in conn.execute(
            sa.select(webhook_attempts).where(a.delivery_id.in_([r.id for r in rows])).order_by(a.id)
        ):
            attempts.setdefault(r.delivery_id, []).append(
                {
                    "attempt": r.attempt,
                    "status_code": r.status_code,
                    "error": r.error,
                    "started_at": iso_z(r.started_at),
                    "finished_at": iso_z(r.finished_at),
                }
            )
    return [
        {
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
            "attempts": attempts.get(r.id, []),
        }
        for r in rows
    ]
