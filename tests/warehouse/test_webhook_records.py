"""Recording sends: failure streaks counted in completion order, leases renewed and released,
and redelivery of deliveries that failed for good. Sends are claimed from the real queue; their
results are given as a receiver would have answered, in the order they completed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from tests.support import WEBHOOK_KEY
from warehouse.db import Database, utcnow
from warehouse.errors import NotRedeliverable
from warehouse.webhooks import delivery_history, delivery_queue, endpoints
from warehouse.webhooks.delivery_queue import Claimed, SendResult
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_attempts, webhook_deliveries, webhook_events

LEASE = timedelta(seconds=20)


def add(db: Database, workspace: dict, events: list[str]) -> str:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="http://127.0.0.1:9/x",
            events=events,
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    return endpoint.id


def queue_events(db: Database, workspace: dict, n: int, event_type: str = "action.created") -> None:
    with db.write() as conn:
        for i in range(n):
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type=event_type, data={"i": i})


def claim(db: Database, limit: int = 500, now: datetime | None = None) -> list[Claimed]:
    with db.write() as conn:
        return delivery_queue.claim(conn, now=now or utcnow(), limit=limit, lease=LEASE, instance_key=WEBHOOK_KEY)


def answered(statuses: list[int], start: datetime | None = None) -> list[SendResult]:
    """Send results completing one millisecond apart, in the order given."""
    start = start or utcnow()
    return [
        SendResult(
            status_code=code,
            error=None if code < 300 else f"HTTP {code}",
            started_at=start,
            finished_at=start + timedelta(milliseconds=i + 1),
        )
        for i, code in enumerate(statuses)
    ]


def record(db: Database, sends: list[tuple[Claimed, SendResult]]) -> list[delivery_queue.Recorded]:
    with db.write() as conn:
        return delivery_queue.record_batch(conn, sends)


def endpoint(db: Database, endpoint_id: str) -> endpoints.Endpoint:
    with db.read() as conn:
        return endpoints.endpoint_for_operator(conn, endpoint_id)


def test_a_success_between_failures_resets_the_streak_within_one_recording(db: Database, workspace: dict) -> None:
    """A receiver failing 4 % of sends, never twice in a row, is never disabled, however many
    failures one recording holds (the old recorder applied a round's successes first and
    disabled it on any round with 5 failures)."""
    a = add(db, workspace, ["action.created"])
    queue_events(db, workspace, 200)
    batch = claim(db)
    statuses = [500 if i % 25 == 7 else 200 for i in range(200)]  # 8 failures, none adjacent
    statuses[-1] = 503  # and the last send failed: the streak left is 1
    outcomes = record(db, list(zip(batch, answered(statuses), strict=True)))
    assert [o.status for o in outcomes].count("pending") == 9
    assert not any(o.endpoint_disabled for o in outcomes)
    state = endpoint(db, a)
    assert state.status == "enabled" and state.consecutive_failures == 1


def test_five_consecutive_failures_disable_the_endpoint_at_the_fifth(db: Database, workspace: dict) -> None:
    a = add(db, workspace, ["action.created", "integration.error"])
    b = add(db, workspace, ["integration.error"])
    queue_events(db, workspace, 12)
    batch = claim(db)
    statuses = [200, 200, 500, 502, 500, 500, 504, 500, 200, 500, 200, 200]
    outcomes = record(db, list(zip(batch, answered(statuses), strict=True)))
    assert [o.endpoint_disabled for o in outcomes] == [i == 6 for i in range(12)]  # the fifth in a row
    state = endpoint(db, a)
    assert state.status == "disabled" and state.disabled_at is not None
    assert state.consecutive_failures == 0  # the sends still in flight went on after it: the last succeeded
    with db.read() as conn:
        [alert] = conn.execute(
            sa.select(webhook_events.c.id, webhook_events.c.body).where(webhook_events.c.type == "integration.error")
        ).all()
        alerted = conn.execute(
            sa.select(webhook_deliveries.c.endpoint_id).where(webhook_deliveries.c.event_id == alert.id)
        ).scalars()
        assert list(alerted) == [b]  # the disabled endpoint is not told of its own disabling
    data = json.loads(alert.body)["data"]
    assert outcomes[6].integration_error_event_id == alert.id
    assert data["endpoint_id"] == a and data["consecutive_failures"] == 5 and data["last_status_code"] == 504


def test_the_streak_carries_from_one_recording_to_the_next(db: Database, workspace: dict) -> None:
    a = add(db, workspace, ["action.created"])
    queue_events(db, workspace, 10)
    batch = claim(db)
    record(db, list(zip(batch[:2], answered([500, 500]), strict=True)))
    record(db, list(zip(batch[2:4], answered([200, 500]), strict=True)))  # a success in between
    assert endpoint(db, a).consecutive_failures == 1
    record(db, list(zip(batch[4:7], answered([500, 500, 500]), strict=True)))
    assert endpoint(db, a).status == "enabled" and endpoint(db, a).consecutive_failures == 4
    [last] = record(db, list(zip(batch[7:8], answered([500]), strict=True)))
    assert last.endpoint_disabled and endpoint(db, a).status == "disabled"


def test_a_lost_lease_changes_nothing_but_its_attempt_row(db: Database, workspace: dict) -> None:
    a = add(db, workspace, ["action.created"])
    queue_events(db, workspace, 1)
    [mine] = claim(db)
    [theirs] = claim(db, now=utcnow() + LEASE + timedelta(seconds=1))  # my lease expired: taken over
    outcomes = record(db, [(mine, r) for r in answered([500])])
    assert [o.status for o in outcomes] == ["lost"] and endpoint(db, a).consecutive_failures == 0
    assert [o.status for o in record(db, [(theirs, r) for r in answered([200])])] == ["succeeded"]
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(webhook_attempts)).scalar_one() == 2


def test_leases_are_renewed_and_released(db: Database, workspace: dict) -> None:
    add(db, workspace, ["action.created"])
    queue_events(db, workspace, 3)
    batch = claim(db)
    now = utcnow()
    with db.read() as conn:
        assert delivery_queue.leases_alive(conn, now)
        assert not delivery_queue.leases_alive(conn, now + LEASE + timedelta(seconds=1))
    with db.write() as conn:
        assert delivery_queue.renew_leases(conn, [batch[0].lease_token], now=now + LEASE, lease=LEASE) == 3
    later = now + LEASE + timedelta(seconds=1)
    with db.read() as conn:
        assert delivery_queue.leases_alive(conn, later)  # renewed: still held, not due
    assert claim(db, now=later) == []
    with db.write() as conn:
        assert delivery_queue.release(conn, batch[:2]) == 2
    again = claim(db, now=later)
    assert sorted(c.delivery_id for c in again) == sorted(c.delivery_id for c in batch[:2])
    assert [c.attempt for c in again] == [1, 1]  # held back unsent: no attempt counted


def fail_for_good(db: Database, workspace: dict, n: int) -> tuple[str, list[str], list[datetime]]:
    """`n` deliveries to one endpoint that failed all six attempts; their finishing times."""
    a = add(db, workspace, ["action.created"])
    queue_events(db, workspace, n)
    t = utcnow()
    for _ in range(6):
        batch = claim(db, now=t)
        outcomes = record(db, list(zip(batch, answered([500] * len(batch), start=t), strict=True)))
        t += timedelta(hours=7)
        with db.write() as conn:  # the operator re-enables it each time: only the retries are under test
            endpoints.set_enabled(conn, endpoint_id=a, enabled=True)
    assert {o.status for o in outcomes} == {"failed"}
    with db.read() as conn:
        rows = conn.execute(
            sa.select(webhook_deliveries.c.id, webhook_deliveries.c.completed_at).order_by(webhook_deliveries.c.id)
        ).all()
    return a, [r.id for r in rows], [r.completed_at for r in rows]


def test_redeliver_sends_a_failed_delivery_once_more(db: Database, workspace: dict) -> None:
    a, ids, _ = fail_for_good(db, workspace, 3)
    now = utcnow() + timedelta(days=2)
    with db.write() as conn:
        assert delivery_queue.redeliver(conn, endpoint_id=a, now=now, delivery_id=ids[1]) == [ids[1]]
    [again] = claim(db, now=now)
    assert again.delivery_id == ids[1] and again.attempt == 7  # same delivery and event, the next attempt
    [outcome] = record(db, [(again, r) for r in answered([500], start=now)])
    assert outcome.status == "failed"  # no automatic retries after a redelivery
    with db.write() as conn:
        assert delivery_queue.redeliver(conn, endpoint_id=a, now=now) == sorted(ids)
    redone = claim(db, now=now)
    record(db, [(c, r) for c, r in zip(redone, answered([200] * 3, start=now), strict=True)])
    with db.read() as conn:
        history = {d.delivery_id: d for d in delivery_history.history(conn, endpoint_id=a)}
    assert {d.status for d in history.values()} == {"succeeded"}
    assert history[ids[1]].attempt == 8 and history[ids[0]].attempt == 7


def test_redeliver_since_and_its_refusals(db: Database, workspace: dict) -> None:
    a, ids, finished = fail_for_good(db, workspace, 2)
    b = add(db, workspace, ["action.approved"])
    with db.write() as conn:
        assert (
            delivery_queue.redeliver(conn, endpoint_id=a, now=utcnow(), since=max(finished) + timedelta(seconds=1))
            == []
        )
        assert delivery_queue.redeliver(conn, endpoint_id=a, now=utcnow(), since=min(finished)) == sorted(ids)
    with db.write() as conn, pytest.raises(NotRedeliverable, match="is pending"):
        delivery_queue.redeliver(conn, endpoint_id=a, now=utcnow(), delivery_id=ids[0])
    with db.write() as conn, pytest.raises(NotRedeliverable, match="no delivery"):
        delivery_queue.redeliver(conn, endpoint_id=b, now=utcnow(), delivery_id=ids[0])
