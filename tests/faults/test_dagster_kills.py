"""kill -9 under `flokit up` while webhooks drain: first a delivery run, then the daemon.

The whole service runs as an operator starts it (`flokit up`: gunicorn, the Dagster webserver,
the daemon and the runs it launches), with the real sensor and real runs. Events are queued
for a receiver on 127.0.0.1 that takes 100 ms to answer, so a run is mid-drain when it is
killed. Every event must arrive; a duplicate (a delivery and attempt received twice) may only
be a send the killed run had not recorded, at most 2 x its 32 senders.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter

import psutil
import pytest

from tests.support import WEBHOOK_KEY, http_ok, wait_for
from tests.support.up import flokit_up
from tests.support.webhook_receiver import Receiver, running_receiver
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.webhooks import endpoints
from warehouse.webhooks.outbox import emit_event

pytestmark = [pytest.mark.fault, pytest.mark.e2e, pytest.mark.slow]

EVENTS = 1000
SENDERS = 32  # WebhookQueue.max_workers


def processes(up: subprocess.Popen[str], needle: str) -> list[psutil.Process]:
    """`flokit up`'s descendants whose command line holds `needle`. A run is a multiprocessing
    child (`spawn_main`) of the daemon's code server."""
    found = []
    for p in psutil.Process(up.pid).children(recursive=True):
        try:
            if needle in " ".join(p.cmdline()):
                found.append(p)
        except psutil.NoSuchProcess:
            pass
    return found


def distinct(receiver: Receiver, path: str) -> set[str]:
    return {r.header("Service-Delivery-Id") for r in receiver.at(path)}


def duplicates(receiver: Receiver, path: str) -> int:
    sends = Counter((r.header("Service-Delivery-Id"), r.header("Service-Attempt")) for r in receiver.at(path))
    return sum(n - 1 for n in sends.values())


def emit_many(db: Database, workspace: dict, n: int) -> None:
    with db.write() as conn:
        for i in range(n):
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={"i": i})


def kill_mid_drain(
    db: Database, workspace: dict, receiver: Receiver, path: str, up: subprocess.Popen[str], needle: str
) -> dict[str, float]:
    """Queue EVENTS for `path`, SIGKILL the processes matching `needle` once a tenth has
    arrived, and wait for every event. Returns the figures."""
    with db.write() as conn:
        endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url=receiver.url + path, events=["action.created"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
    emit_many(db, workspace, EVENTS)
    wait_for(lambda: len(receiver.at(path)) >= EVENTS // 10, 120, f"the first sends to {path}", up)
    victims = processes(up, needle)
    assert victims, f"no process matching {needle!r} while draining"
    for victim in victims:
        victim.send_signal(signal.SIGKILL)
    killed_at, received_at_kill = time.monotonic(), len(receiver.at(path))
    wait_for(lambda: len(distinct(receiver, path)) == EVENTS, 180, f"every event at {path} after the kill", up)
    return {
        "killed": len(victims),
        "received_at_kill": received_at_kill,
        "received": len(receiver.at(path)),
        "duplicates": duplicates(receiver, path),
        "lost": EVENTS - len(distinct(receiver, path)),
        "recovered_s": round(time.monotonic() - killed_at, 1),
    }


def test_every_event_arrives_after_a_run_and_then_the_daemon_are_killed_mid_drain(
    settings: Settings, db: Database, workspace: dict
) -> None:
    with running_receiver() as receiver:
        receiver.respond = lambda _got: (time.sleep(0.1), (200, b"ok"))[1]
        env = {
            "FLOKIT_DATABASE_URL": settings.database_url,
            "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1",
            "FLOKIT_SENSOR_INTERVAL_S": "1",
            "FLOKIT_SECRET_KEY": WEBHOOK_KEY,  # the key the test's endpoints are sealed with
        }
        with flokit_up(settings.data_dir, env=env) as up:
            wait_for(http_ok(f"{up.api}/healthz"), 180, "API", up.process)
            run = kill_mid_drain(db, workspace, receiver, "/run-killed", up.process, "spawn_main")
            daemon = kill_mid_drain(db, workspace, receiver, "/daemon-killed", up.process, "dagster-daemon")
            assert up.process.poll() is None  # the supervisor restarted the daemon; the service stayed up
            assert up.stop(signal.SIGINT) == 0
        output = up.output()
    backend = "SQLite" if settings.is_sqlite else "PostgreSQL"
    for what, figures in (("run", run), ("daemon", daemon)):
        print(f"\n[fault] {backend}: {what} killed mid-drain of {EVENTS} webhooks: {figures}")
        assert figures["lost"] == 0
        assert figures["duplicates"] <= 2 * SENDERS
    assert "dagster-daemon" in output and "restart" in output.lower()
