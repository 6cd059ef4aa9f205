"""Webhook delivery under faults: a drain killed mid-round, flaky and dead receivers.

Each scenario uses the real drain loop against a real HTTP receiver on 127.0.0.1 and prints its
figures (docs/reliability.md). A delivery is identified by its `Service-Delivery-Id`; a
duplicate is a (delivery, attempt) the receiver got twice: a send whose outcome was never
recorded, resent after the crash under the same attempt number.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration.resources import DatabaseResource
from orchestration.webhooks.drain import DrainReport, drain, serve
from orchestration.webhooks.jobs import SLOT_TAG
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.webhooks.sensors import build_webhook_sensor
from tests.support import ROOT, WEBHOOK_KEY
from tests.support.webhook_receiver import Received, Receiver, running_receiver
from warehouse.db import Database, utcnow
from warehouse.webhooks import delivery_history, endpoints
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_events
from warehouse.webhooks.wakeup import Wakeups

pytestmark = [
    pytest.mark.fault,
    pytest.mark.both_backends(
        reason="drains claim under each backend's locks; a drain that cannot record meets its outage"
    ),
]
LOG = logging.getLogger("tests.faults.webhooks")

# A drain in its own process, as a Dagster run is: killed with SIGKILL mid-round by the test.
DRAIN_PROCESS = """
import logging, sys
from orchestration.webhooks.drain import DrainReport, drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from warehouse.db import Database, utcnow
queue = WebhookQueue(lease_s=float(sys.argv[2]), renew_every_s=0.5, max_workers=int(sys.argv[3]), max_run_s=120)
drain(Database(sys.argv[1]), queue, WebhookHttpClient(allow_private=True), logging.getLogger("drain"), WEBHOOK_KEY)
"""

# The long-lived drain of one slot in its own process (a deployed drain run): killed mid-stream.
LONG_DRAIN_PROCESS = """
import logging, sys
from datetime import timedelta
from orchestration.webhooks.drain import serve
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from warehouse.db import Database, utcnow
from warehouse.webhooks.wakeup import Wakeups
db = Database(sys.argv[1])
queue = WebhookQueue(lease_s=2.0, renew_every_s=0.5, max_workers=8, lifetime_s=120, beat_every_s=0.5)
with Wakeups(db) as wakeups:
    serve(db, queue, WebhookHttpClient(allow_private=True), logging.getLogger("drain"), WEBHOOK_KEY,
          slot="a", run_id="victim", ends_at=utcnow() + timedelta(seconds=120), wakeups=wakeups)
"""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


def add(db: Database, workspace: dict, url: str, events: list[str]) -> str:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url=url,
            events=events,
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    return endpoint.id


def emit_many(db: Database, workspace: dict, n: int, event_type: str = "action.created") -> None:
    with db.write() as conn:
        for i in range(n):
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type=event_type, data={"i": i})


def sends(received: list[Received]) -> Counter[tuple[str, str]]:
    return Counter((r.header("Service-Delivery-Id"), r.header("Service-Attempt")) for r in received)


def test_a_drain_killed_mid_round_resends_at_most_its_sends_in_flight(
    db: Database, workspace: dict, receiver: Receiver
) -> None:
    """The old drain recorded a round of 200 once, at its end: killed mid-round, it left every
    send of the round unrecorded, and all were sent again (192 duplicates in the issue)."""
    add(db, workspace, receiver.url + "/a", ["action.created"])
    total, workers, lease_s, kill_at = 300, 8, 2.0, 100
    emit_many(db, workspace, total)
    victim: list[subprocess.Popen[bytes]] = []

    def kill_mid_drain(got: Received) -> None:
        if len(receiver.requests) == kill_at:
            os.kill(victim[0].pid, signal.SIGKILL)

    receiver.respond = lambda _got: (time.sleep(0.02), (200, b"ok"))[1]  # a receiver taking 20 ms
    receiver.on_receive = kill_mid_drain
    argv = [sys.executable, "-c", DRAIN_PROCESS, db.url, str(lease_s), str(workers)]
    victim.append(subprocess.Popen(argv, cwd=ROOT))
    assert victim[0].wait(timeout=120) == -signal.SIGKILL
    killed_at = time.monotonic()
    before = len(receiver.requests)

    # What is left is due again once the killed drain's leases lapse (it renews them no more).
    deadline = killed_at + 30
    while time.monotonic() < deadline:
        report = drain(db, WebhookQueue(max_workers=workers), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
        if len({d for d, _ in sends(receiver.at("/a"))}) == total:
            break
        time.sleep(0.2)
    recovered_s = time.monotonic() - killed_at
    got = sends(receiver.at("/a"))
    duplicates = sum(n - 1 for n in got.values())
    print(
        f"\n[fault] drain killed at receipt {before} of {total}: received {sum(got.values())}, "
        f"distinct deliveries {len({d for d, _ in got})}, duplicates {duplicates}, lost "
        f"{total - len({d for d, _ in got})}, all delivered {recovered_s:.1f} s after the kill "
        f"(lease {lease_s:.0f} s); last drain {dict(report.counts)}"
    )
    assert len({d for d, _ in got}) == total  # every event arrived
    assert duplicates <= 2 * workers  # at most the sends in flight and the group being recorded
    assert recovered_s < lease_s + 10


def test_leases_outlive_slow_sends_while_the_drain_lives(db: Database, workspace: dict, receiver: Receiver) -> None:
    """Sends slower than the lease: the lease keeper renews it, so a second drain that starts
    meanwhile finds nothing to claim and nothing is sent twice."""
    add(db, workspace, receiver.url + "/slow", ["action.created"])
    emit_many(db, workspace, 6)
    receiver.respond = lambda _got: (time.sleep(2.5), (200, b"ok"))[1]
    argv = [sys.executable, "-c", DRAIN_PROCESS, db.url, "1.0", "6"]
    first = subprocess.Popen(argv, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while len(receiver.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)  # past the 1 s lease of every send, each still waiting for its answer
        second = drain(db, WebhookQueue(), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
        assert second.sends == 0
        assert first.wait(timeout=30) == 0
    finally:
        first.kill()
    assert sorted(sends(receiver.at("/slow")).values()) == [1] * 6
    with db.read() as conn:
        history = delivery_history.history(conn, endpoint_id=deliveries_endpoint(conn))
    assert {d.status for d in history} == {"succeeded"}


def deliveries_endpoint(conn: sa.Connection) -> str:
    from warehouse.webhooks.tables import webhook_endpoints

    return conn.execute(sa.select(webhook_endpoints.c.id)).scalar_one()


def test_a_receiver_failing_5_percent_at_random_is_never_disabled(
    db: Database, workspace: dict, receiver: Receiver
) -> None:
    """Any round of 200 sends with 5 failures disabled such an endpoint before; failures are now
    counted in the order the sends completed, a success resetting the count."""
    a = add(db, workspace, receiver.url + "/flaky", ["action.created"])
    total = 600
    emit_many(db, workspace, total)
    rng = random.Random(12)
    receiver.respond = lambda _got: (500, b"no") if rng.random() < 0.05 else (200, b"ok")
    queue = WebhookQueue(backoff_scale=0.0, max_workers=16)  # retries due at once: one drain does it all
    report = drain(db, queue, WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
    got = sends(receiver.at("/flaky"))
    failed = report.counts["pending"]
    print(
        f"\n[fault] 5 % flaky receiver: {sum(got.values())} sends for {total} events, {failed} failed "
        f"and were retried; endpoint {report.disabled or 'never disabled'}"
    )
    with db.read() as conn:
        state = endpoints.endpoint_for_operator(conn, a)
        history = delivery_history.history(conn, endpoint_id=a, limit=total)
        alerts = conn.execute(sa.select(webhook_events.c.id).where(webhook_events.c.type == "integration.error"))
        assert alerts.first() is None
    assert failed > 0 and report.disabled == [] and state.status == "enabled"
    assert len(history) == total and {d.status for d in history} == {"succeeded"}


def test_a_receiver_failing_every_send_is_disabled_after_exactly_5(
    db: Database, workspace: dict, receiver: Receiver
) -> None:
    dead = add(db, workspace, receiver.url + "/dead", ["action.created", "integration.error"])
    add(db, workspace, receiver.url + "/ops", ["integration.error"])
    total, workers = 60, 4
    emit_many(db, workspace, total)
    receiver.status["/dead"] = 503
    report = drain(db, WebhookQueue(max_workers=workers), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
    to_dead = len(receiver.at("/dead"))
    [alert] = receiver.at("/ops")
    print(
        f"\n[fault] dead receiver: disabled after {to_dead} sends ({workers} in flight at most), "
        f"{report.counts['held_back']} claimed sends held back, integration.error to the other endpoint"
    )
    assert report.disabled == [dead]
    assert b'"consecutive_failures":5' in alert.body and b'"reason":"webhook_endpoint_disabled"' in alert.body
    assert 5 <= to_dead <= 5 + 2 * workers  # nothing is sent once the fifth failure is recorded
    with db.read() as conn:
        assert endpoints.endpoint_for_operator(conn, dead).status == "disabled"
        waiting = delivery_history.history(conn, endpoint_id=dead, limit=total)
    assert len(waiting) == total and {d.status for d in waiting} == {"pending"}

    # Events emitted while it is disabled wait for it too; re-enabled and healthy, it gets all.
    emit_many(db, workspace, 5)
    assert drain(db, WebhookQueue(), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY).sends == 0
    receiver.status["/dead"] = 200
    with db.write() as conn:
        endpoints.set_enabled(conn, endpoint_id=dead, enabled=True)
    # 31 s on: the retries of the sends that failed (30 s after the first attempt) are due too.
    drain(db, WebhookQueue(clock_offset_s=31), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
    with db.read() as conn:
        history = delivery_history.history(conn, endpoint_id=dead, limit=1000)
    assert len(history) == total + 5 and {d.status for d in history} == {"succeeded"}


def test_a_drain_that_cannot_record_stops_sending_and_ends(db: Database, workspace: dict, receiver: Receiver) -> None:
    """The database fails the drain's first record (here the attempts table is gone: a bug, not
    an outage, so nothing retries it). The drain must end with the error, promptly, without
    sending the rest of its claim: its senders waiting for a place must not hang the pool."""
    add(db, workspace, receiver.url + "/a", ["action.created"])
    emit_many(db, workspace, 60)
    workers = 4

    def break_recording(got: Received) -> None:
        if len(receiver.requests) == 1:
            with db.write() as conn:
                conn.exec_driver_sql("DROP TABLE webhook_attempts")

    receiver.on_receive = break_recording
    receiver.respond = lambda _got: (time.sleep(0.05), (200, b"ok"))[1]
    outcome: list[BaseException | DrainReport] = []

    def run() -> None:
        try:
            outcome.append(
                drain(db, WebhookQueue(max_workers=workers), WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY)
            )
        except BaseException as exc:
            outcome.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive(), "the drain hung after its recording failed"
    assert isinstance(outcome[0], sa.exc.DBAPIError), outcome
    assert len(receiver.at("/a")) <= 2 * workers  # nothing sent once the drain was stopping


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def test_a_long_lived_drain_killed_mid_stream_loses_nothing_and_its_slot_is_relaunched(
    db: Database, workspace: dict, receiver: Receiver, stack: ExitStack
) -> None:
    """A deployed drain run killed with SIGKILL while events stream in: Dagster would still call
    it STARTED, but its heartbeat stops, so the sensor requests its slot again within
    `stale_after_s`; the relaunched drain sends what the killed one left (its leases lapse) and
    what arrived meanwhile. Nothing is lost; duplicates stay within the sends in flight."""
    add(db, workspace, receiver.url + "/s", ["action.created"])
    total, kill_at, workers = 150, 50, 8
    queue = WebhookQueue(lifetime_s=120, stale_after_s=2.0, max_workers=workers)
    sensor = build_webhook_sensor(1)
    resources = {"database": DatabaseResource(url=db.url), "webhook_queue": queue}
    instance = stack.enter_context(dg.instance_for_test())
    victim = subprocess.Popen([sys.executable, "-c", LONG_DRAIN_PROCESS, db.url], cwd=ROOT)
    killed: list[float] = []

    def kill_mid_stream(_got: Received) -> None:
        if len(receiver.requests) == kill_at and not killed:
            os.kill(victim.pid, signal.SIGKILL)
            killed.append(time.monotonic())

    receiver.on_receive = kill_mid_stream

    def stream() -> None:  # 50 events a second, one transaction each, as an API would emit them
        for _ in range(total):
            emit_many(db, workspace, 1)
            time.sleep(0.02)

    producer = threading.Thread(target=stream)
    producer.start()
    try:
        assert victim.wait(timeout=60) == -signal.SIGKILL
    finally:
        victim.kill()

    # The sensor, as the daemon evaluates it: the slot is dead once its beat is 2 s old.
    relaunch: list[str] = []  # slot b has no drain in this test: requested at every tick
    while "a" not in relaunch and time.monotonic() - killed[0] < 10:
        result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
        if isinstance(result, dg.SensorResult):
            relaunch = [r.tags[SLOT_TAG] for r in result.run_requests]
        time.sleep(0.2)
    relaunched_s = time.monotonic() - killed[0]
    assert "a" in relaunch

    # The relaunched run of slot a drains what is left and what still streams in.
    with Wakeups(db) as wakeups:
        ends_at = utcnow() + timedelta(seconds=8)
        report = serve(db, queue, WebhookHttpClient(allow_private=True), LOG, WEBHOOK_KEY,
                       slot="a", run_id="relaunched", ends_at=ends_at, wakeups=wakeups)  # fmt: skip
    producer.join()
    got = sends(receiver.at("/s"))
    duplicates = sum(n - 1 for n in got.values())
    print(
        f"\n[fault] long-lived drain killed at receipt {kill_at} of a {total}-event stream: slot "
        f"relaunched {relaunched_s:.1f} s after the kill; distinct {len({d for d, _ in got})}, "
        f"duplicates {duplicates}; relaunched drain {dict(report.counts)}"
    )
    assert len({d for d, _ in got}) == total  # nothing lost
    assert duplicates <= 2 * workers
    assert relaunched_s < 2.0 + 3  # stale after 2 s, plus a tick and this machine's load
