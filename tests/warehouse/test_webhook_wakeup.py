"""Waking the drains: what makes a delivery due now notifies the listening drains at its commit
(PostgreSQL), and the drain slots' heartbeats."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from tests.support import WEBHOOK_KEY
from warehouse.db import Database, utcnow
from warehouse.webhooks import delivery_queue, drains, endpoints
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.wakeup import Wakeups


def add(db: Database, workspace: dict) -> str:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="http://127.0.0.1:9/x",
            events=["action.created"],
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    return endpoint.id


def emit(db: Database, workspace: dict, n: int = 1) -> None:
    with db.write() as conn:
        for i in range(n):
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={"i": i})


def test_an_emitted_delivery_wakes_a_listening_drain_at_commit(db: Database, workspace: dict) -> None:
    add(db, workspace)
    with Wakeups(db) as wakeups:
        if db.is_sqlite:  # no notifications: the drain polls, and a poll finds the delivery due
            started = time.monotonic()
            assert wakeups.wait(0.05) is False and time.monotonic() - started >= 0.05
            emit(db, workspace)
            with db.read() as conn:
                assert delivery_queue.any_due(conn, utcnow())
            return
        assert wakeups.wait(0.1) is True  # just connected: look first (a notify may have been missed)
        assert wakeups.wait(0.1) is False  # nothing happened
        with db.write() as conn:
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={})
            assert wakeups.wait(0.2) is False  # not before the commit
        started = time.monotonic()
        assert wakeups.wait(2.0) is True
        assert time.monotonic() - started < 0.5
        emit(db, workspace, n=50)  # one transaction, 50 events: one wake-up, collapsed
        assert wakeups.wait(2.0) is True
        assert wakeups.wait(0.2) is False


def emit_then_fail(db: Database, workspace: dict) -> None:
    with db.write() as conn:
        emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={})
        raise RuntimeError("the producer's change failed")


def test_a_rolled_back_emit_wakes_nobody(db: Database, workspace: dict) -> None:
    add(db, workspace)
    with Wakeups(db) as wakeups:
        wakeups.wait(0.05)  # the first wait after connecting says "look"
        with pytest.raises(RuntimeError, match="failed"):
            emit_then_fail(db, workspace)
        assert wakeups.wait(0.3) is False
        with db.read() as conn:
            assert not delivery_queue.any_due(conn, utcnow())


def test_enabling_an_endpoint_and_redelivering_wake_the_drains(db: Database, workspace: dict) -> None:
    endpoint_id = add(db, workspace)
    with db.write() as conn:
        endpoints.set_enabled(conn, endpoint_id=endpoint_id, enabled=False)
    emit(db, workspace)
    with Wakeups(db) as wakeups:
        wakeups.wait(0.05)
        assert wakeups.wait(0.3) is False  # the emit committed before anyone listened
        with db.read() as conn:
            assert not delivery_queue.any_due(conn, utcnow())  # waiting for its endpoint
        with db.write() as conn:
            endpoints.set_enabled(conn, endpoint_id=endpoint_id, enabled=True)
        assert wakeups.wait(2.0) is (not db.is_sqlite)
        with db.read() as conn:
            assert delivery_queue.any_due(conn, utcnow())


def test_drain_slots_beat_and_end(db: Database) -> None:
    now = utcnow()
    with db.write() as conn:
        end = now + timedelta(seconds=900)
        drains.beat(conn, slot="a", run_id="run-1", now=now, ends_at=end)
        drains.beat(conn, slot="a", run_id="run-1", now=now + timedelta(seconds=2), ends_at=end)
        drains.beat(conn, slot="b", run_id="run-2", now=now, ends_at=now + timedelta(seconds=450))
    with db.read() as conn:
        slots = drains.slots(conn)
    assert slots["a"].run_id == "run-1" and slots["a"].beat_at == now + timedelta(seconds=2)
    assert slots["a"].alive(now + timedelta(seconds=5), stale_after_s=10)
    assert not slots["a"].alive(now + timedelta(seconds=13), stale_after_s=10)  # no beat for 11 s
    with db.write() as conn:
        drains.end(conn, slot="b", run_id="someone-else", now=now)  # not its run: unchanged
        drains.end(conn, slot="a", run_id="run-1", now=now + timedelta(seconds=3))
    with db.read() as conn:
        slots = drains.slots(conn)
    assert slots["b"].alive(now + timedelta(seconds=1), stale_after_s=10)
    assert not slots["a"].alive(now + timedelta(seconds=4), stale_after_s=10)  # ended: relaunch now
