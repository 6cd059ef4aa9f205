"""The webhook delivery queue: find due work, lease it safely, record each send, redeliver.

What was sent, for the CLI and the dashboard, is read in `delivery_history.py`.

Claims are one `UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED) RETURNING`: on
PostgreSQL concurrent runs skip each other's rows; on SQLite the statement runs inside
`BEGIN IMMEDIATE` (`db.write()`), which serializes writers, and SQLAlchemy drops the FOR UPDATE.
A claim is a lease, renewed by the run that holds it while it lives: a run that dies leaves rows
`delivering` until `lease_until`, then they are due again. Results are written only by the
lease holder (`lease_token` must match).
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
from transforms.webhooks import payloads
from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES, next_attempt_at
from warehouse import audit
from warehouse.errors import NotRedeliverable
from warehouse.webhooks.endpoints import endpoint_for_operator, signing_secrets
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_attempts, webhook_deliveries, webhook_endpoints, webhook_events
from warehouse.webhooks.wakeup import wake_drains

_ERROR_CHARS = 500
# How much of a receiver's answer an attempt keeps (the dashboard shows it beside the status code).
EXCERPT_CHARS = 500
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
    # Set when this send is a resend or recovery (`recovery.py`): the status the delivery goes
    # back to if it fails. Such a send is left out of the endpoint's failure streak.
    resend_from: str | None = None


@dataclass(frozen=True)
class SendResult:
    status_code: int | None
    error: str | None
    started_at: datetime
    finished_at: datetime
    response_excerpt: str | None = None  # the start of the receiver's answer, if one came

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


def any_due(conn: Connection, now: datetime) -> bool:
    """Whether a delivery of an enabled endpoint is due (one indexed read): what a long-lived
    drain polls on SQLite, and checks on PostgreSQL when a second passed without a wake-up."""
    return conn.execute(_due_query(now).limit(1)).first() is not None


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


def claim(
    conn: Connection,
    *,
    now: datetime,
    limit: int,
    lease: timedelta,
    instance_key: str,
    skip_endpoints: Sequence[str] = (),
) -> list[Claimed]:
    """Lease up to `limit` due deliveries of enabled endpoints (but `skip_endpoints`), oldest
    due first, with their endpoints' signing secrets unsealed under `instance_key`."""
    d = webhook_deliveries.c
    token = new_id("req")
    due = _due_query(now)
    if skip_endpoints:
        due = due.where(d.endpoint_id.not_in(list(skip_endpoints)))
    picked = (
        due.order_by(d.next_attempt_at, d.id)
        .limit(limit)
        .with_for_update(skip_locked=True, of=webhook_deliveries)
        .scalar_subquery()
    )
    rows = conn.execute(
        webhook_deliveries.update()
        .where(d.id.in_(picked))
        .values(status="delivering", lease_until=now + lease, lease_token=token, claims=d.claims + 1)
        .returning(d.id, d.event_id, d.endpoint_id, d.workspace_id, d.attempt, d.resend_from)
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
    secrets = signing_secrets(conn, endpoints, now, instance_key=instance_key)
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
            resend_from=r.resend_from,
        )
        for r in sorted(rows, key=lambda r: r.id)
    ]


def renew_leases(conn: Connection, tokens: Sequence[str], *, now: datetime, lease: timedelta) -> int:
    """Extend the leases a live run still holds (its heartbeat); how many deliveries."""
    d = webhook_deliveries.c
    return conn.execute(
        webhook_deliveries.update()
        .where(d.lease_token.in_(list(tokens)), d.status == "delivering")
        .values(lease_until=now + lease)
    ).rowcount


def release(conn: Connection, claims: Sequence[Claimed]) -> int:
    """Hand leased deliveries back unsent (their endpoint was disabled before their turn came):
    due again as they were, no attempt counted. Only the lease holder's rows are touched."""
    d = webhook_deliveries.c
    released = 0
    for token in {c.lease_token for c in claims}:
        released += conn.execute(
            webhook_deliveries.update()
            .where(
                d.id.in_([c.delivery_id for c in claims if c.lease_token == token]),
                d.lease_token == token,
                d.status == "delivering",
            )
            .values(status="pending", lease_until=None, lease_token=None)
        ).rowcount
    return released


def leases_alive(conn: Connection, now: datetime) -> bool:
    """Whether some run holds a lease it is still renewing: a drain is alive and sending."""
    d = webhook_deliveries.c
    row = conn.execute(sa.select(d.id).where(d.status == "delivering", d.lease_until >= now).limit(1)).first()
    return row is not None


def record(conn: Connection, claimed: Claimed, result: SendResult, *, backoff_scale: float = 1.0) -> Recorded:
    """Write one send's outcome (see `record_batch`)."""
    return record_batch(conn, [(claimed, result)], backoff_scale=backoff_scale)[0]


def record_batch(
    conn: Connection, sends: Sequence[tuple[Claimed, SendResult]], *, backoff_scale: float = 1.0
) -> list[Recorded]:
    """Write sends in the caller's transaction, `sends` in the order they completed: every
    attempt row, each delivery's next state, then the endpoints' failure streaks.

    The streak is walked in completion order, a success resetting it, so an endpoint is
    disabled only by 5 failures with no success between them (spec: "5 consecutive failures"),
    however the sends are grouped into transactions. On the fifth the endpoint is disabled and
    an `integration.error` event goes to the workspace's other enabled endpoints. Successes
    (the common case) are written with a few set-based statements, not one per send, which
    matters on PostgreSQL where every statement is a round trip. A resend (`Claimed.resend_from`)
    counts in no streak, and when it fails the delivery goes back to the status it had (see
    `transforms.webhooks.recovery`). A send whose lease was lost
    (another run took the delivery over and records its own send) changes nothing but its
    attempt row. Outcomes come back in the order of `sends`."""
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
                "response_excerpt": _excerpt(r.response_excerpt),
                "started_at": r.started_at,
                "finished_at": r.finished_at,
            }
            for c, r in sends
        ],
    )
    held = _record_successes(conn, [(c, r) for c, r in sends if r.ok])
    for c, r in sends:
        if not r.ok and (status := _record_failure(conn, c, r, backoff_scale)) is not None:
            held[c.delivery_id] = status
    # Resends and recoveries are the client's own probes: left out of the streak both ways.
    alerts = _update_streaks(conn, [(c, r) for c, r in sends if c.delivery_id in held and c.resend_from is None])
    return [
        Recorded(c.delivery_id, held.get(c.delivery_id, "lost"), c.delivery_id in alerts, alerts.get(c.delivery_id))
        for c, _ in sends
    ]


def _record_successes(conn: Connection, sends: Sequence[tuple[Claimed, SendResult]]) -> dict[str, str]:
    """Mark succeeded, in one statement per (lease, status code); the deliveries still held."""
    groups: dict[tuple[str, int | None], list[tuple[Claimed, SendResult]]] = {}
    for c, r in sends:
        groups.setdefault((c.lease_token, r.status_code), []).append((c, r))
    d = webhook_deliveries.c
    held: dict[str, str] = {}
    for (token, status_code), items in groups.items():
        for delivery_id in conn.execute(
            webhook_deliveries.update()
            .where(d.id.in_([c.delivery_id for c, _ in items]), d.lease_token == token, d.status == "delivering")
            .values(
                status="succeeded",
                attempt=d.attempt + 1,
                next_attempt_at=None,
                lease_until=None,
                lease_token=None,
                last_status_code=status_code,
                last_error=None,
                completed_at=max(r.finished_at for _, r in items),
                resend_from=None,
            )
            .returning(d.id)
        ).scalars():
            held[delivery_id] = "succeeded"
    return held


def _excerpt(text: str | None) -> str | None:
    """At most EXCERPT_CHARS, without NUL (PostgreSQL text cannot hold it; receivers may send any bytes)."""
    return None if text is None else text[:EXCERPT_CHARS].replace("\x00", "\N{REPLACEMENT CHARACTER}")


def _error(result: SendResult) -> str | None:
    return None if result.error is None else result.error[:_ERROR_CHARS]


def _record_failure(conn: Connection, claimed: Claimed, result: SendResult, backoff_scale: float) -> str | None:
    """Schedule the retry (`pending`) or fail the delivery for good (`failed`); None if the
    lease was lost."""
    d = webhook_deliveries.c
    values: dict[str, Any]
    if claimed.resend_from in ("succeeded", "failed"):
        # A resend of a finished delivery: one send, no automatic retries; a delivered one keeps
        # the time it was delivered.
        status = claimed.resend_from
        values = {"next_attempt_at": None}
        if status == "failed":
            values["completed_at"] = result.finished_at
    else:
        retry_at = next_attempt_at(claimed.attempt, result.finished_at, backoff_scale)
        status = "pending" if retry_at is not None else "failed"
        values = {"next_attempt_at": retry_at, "completed_at": None if retry_at is not None else result.finished_at}
    held = conn.execute(
        webhook_deliveries.update()
        .where(d.id == claimed.delivery_id, d.lease_token == claimed.lease_token, d.status == "delivering")
        .values(
            status=status,
            attempt=claimed.attempt,
            lease_until=None,
            lease_token=None,
            last_status_code=result.status_code,
            last_error=_error(result),
            resend_from=None,
            **values,
        )
        .returning(d.id)
    ).first()
    return None if held is None else status


def _update_streaks(conn: Connection, sends: Sequence[tuple[Claimed, SendResult]]) -> dict[str, str]:
    """Walk the recorded sends in completion order over each endpoint's streak, write the new
    streaks and disable the endpoints that reached the limit. Returns, per send that disabled
    its endpoint, the id of the `integration.error` event it caused.

    The endpoints' rows are locked (FOR UPDATE, in id order; SQLite's BEGIN IMMEDIATE already
    serializes writers) so that concurrent runs recording sends of one endpoint add up."""
    if not sends:
        return {}
    e = webhook_endpoints.c
    rows = conn.execute(
        sa.select(e.id, e.consecutive_failures, e.status)
        .where(e.id.in_(sorted({c.endpoint_id for c, _ in sends})))
        .order_by(e.id)
        .with_for_update()
    ).all()
    before = {r.id: r.consecutive_failures for r in rows}
    streak = dict(before)
    enabled = {r.id for r in rows if r.status == "enabled"}
    tripped: dict[str, tuple[Claimed, SendResult, int]] = {}
    for c, r in sends:
        streak[c.endpoint_id] = 0 if r.ok else streak[c.endpoint_id] + 1
        reached = streak[c.endpoint_id] >= DISABLE_AFTER_FAILURES
        if reached and c.endpoint_id in enabled and c.endpoint_id not in tripped:
            tripped[c.endpoint_id] = (c, r, streak[c.endpoint_id])
    for endpoint_id, value in streak.items():
        if value != before[endpoint_id]:
            conn.execute(webhook_endpoints.update().where(e.id == endpoint_id).values(consecutive_failures=value))
    alerts: dict[str, str] = {}
    for claimed, result, count in tripped.values():
        event_id = _disable(conn, claimed, result, count)
        if event_id is not None:
            alerts[claimed.delivery_id] = event_id
    return alerts


def _disable(conn: Connection, claimed: Claimed, result: SendResult, consecutive_failures: int) -> str | None:
    """Disable the endpoint and tell the workspace's other endpoints (`integration.error`)."""
    e = webhook_endpoints.c
    disabled = conn.execute(
        webhook_endpoints.update()
        .where(e.id == claimed.endpoint_id, e.status == "enabled")
        .values(status="disabled", disabled_at=result.finished_at)
        .returning(e.url)
    ).first()
    if disabled is None:  # disabled meanwhile by the operator
        return None
    return emit_event(
        conn,
        workspace_id=claimed.workspace_id,
        event_type="integration.error",
        data=payloads.integration_error(
            endpoint_id=claimed.endpoint_id,
            url=disabled.url,
            consecutive_failures=consecutive_failures,
            last_status_code=result.status_code,
            last_error=_error(result),
        ),
        now=result.finished_at,
        except_endpoint=claimed.endpoint_id,
    )


def redeliver(
    conn: Connection,
    *,
    endpoint_id: str,
    now: datetime,
    since: datetime | None = None,
    delivery_id: str | None = None,
    actor: str = "cli",
) -> list[str]:
    """Deliveries of the endpoint that failed for good (optionally: finished at or after
    `since`, or just `delivery_id`) made due now for one more attempt of the same frozen event:
    same event id, delivery id and body, the attempt count going on (7, 8, ...). If that attempt
    fails the delivery is failed again, with no automatic retries: redelivery is the operator's
    call each time. An endpoint that is disabled keeps them waiting until it is enabled."""
    endpoint = endpoint_for_operator(conn, endpoint_id)
    d = webhook_deliveries.c
    if delivery_id is not None:
        row = conn.execute(sa.select(d.endpoint_id, d.status).where(d.id == delivery_id)).first()
        if row is None or row.endpoint_id != endpoint_id:
            raise NotRedeliverable(f"no delivery {delivery_id} to endpoint {endpoint_id}")
        if row.status != "failed":
            raise NotRedeliverable(
                f"delivery {delivery_id} is {row.status}: only deliveries that failed for good are redelivered"
            )
    query = webhook_deliveries.update().where(d.endpoint_id == endpoint_id, d.status == "failed")
    if since is not None:
        query = query.where(d.completed_at >= since)
    if delivery_id is not None:
        query = query.where(d.id == delivery_id)
    redelivered = sorted(
        conn.execute(query.values(status="pending", next_attempt_at=now, completed_at=None).returning(d.id)).scalars()
    )
    if redelivered:
        wake_drains(conn)
    audit.record(
        conn,
        workspace_id=endpoint.workspace_id,
        actor=actor,
        action="webhook_endpoint.redelivered",
        subject_id=endpoint_id,
        detail={
            "deliveries": len(redelivered),
            "since": iso_z(since),
            "delivery_id": delivery_id,
        },
    )
    return redelivered
