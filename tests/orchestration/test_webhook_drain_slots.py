"""The long-lived drain runs: the sensor keeps two slots alive by their heartbeats, and a run
wakes on PostgreSQL NOTIFY (or SQLite's short poll) to send within a fraction of a second.

The runs are real job runs (`execute_in_process`) with a short lifetime, in a thread; the
receiver is a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from orchestration.resources import DatabaseResource, InstanceKeyResource
from orchestration.webhooks.jobs import SLOT_TAG, webhook_deliveries_job
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.webhooks.sensors import build_webhook_sensor
from tests.support import WEBHOOK_KEY
from tests.support.databases import fresh_database_url
from tests.support.webhook_receiver import Receiver, receiver
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, database_for, utcnow
from warehouse.settings import Settings
from warehouse.webhooks import drains, endpoints
from warehouse.webhooks.outbox import emit_event

__all__ = ["receiver"]  # fixture (tests/support/webhook_receiver.py)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def add(db: Database, workspace: dict, url: str) -> str:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url=url,
            events=["action.created"],
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    return endpoint.id


def emit(db: Database, workspace: dict, i: int = 0) -> None:
    with db.write() as conn:
        emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={"i": i})


def tick(settings: Settings, instance: dg.DagsterInstance, queue: WebhookQueue) -> dg.SensorResult | dg.SkipReason:
    context = dg.build_sensor_context(
        instance=instance,
        resources={"database": DatabaseResource(url=settings.database_url), "webhook_queue": queue},
    )
    return build_webhook_sensor(5)(context)


def beat(db: Database, slot: str, run_id: str, at: datetime, ends_in_s: float = 900) -> None:
    with db.write() as conn:
        drains.beat(conn, slot=slot, run_id=run_id, now=at, ends_at=at + timedelta(seconds=ends_in_s))


def test_the_sensor_keeps_both_slots_alive_by_their_heartbeats(
    db: Database, settings: Settings, instance: dg.DagsterInstance
) -> None:
    """Nothing due: both slots are launched anyway (the first event must not wait a launch).
    A run waiting to start holds its slot; a beating run holds it; a run that beat and went
    quiet for 10 s does not, although Dagster still calls it STARTED (a killed process)."""
    queue = WebhookQueue(lifetime_s=900)
    result = tick(settings, instance, queue)
    assert isinstance(result, dg.SensorResult)
    assert [r.tags[SLOT_TAG] for r in result.run_requests] == ["a", "b"]
    assert {r.tags["dagster/max_runtime"] for r in result.run_requests} == {"1200"}

    queued = instance.create_run_for_job(webhook_deliveries_job, tags={SLOT_TAG: "a"})  # NOT_STARTED
    result = tick(settings, instance, queue)
    assert isinstance(result, dg.SensorResult) and [r.tags[SLOT_TAG] for r in result.run_requests] == ["b"]

    now = utcnow()
    instance.report_run_canceled(queued)
    a = instance.create_run_for_job(webhook_deliveries_job, tags={SLOT_TAG: "a"}, status=dg.DagsterRunStatus.STARTED)
    b = instance.create_run_for_job(webhook_deliveries_job, tags={SLOT_TAG: "b"}, status=dg.DagsterRunStatus.STARTED)
    beat(db, "a", a.run_id, now)
    beat(db, "b", b.run_id, now)
    assert isinstance(tick(settings, instance, queue), dg.SkipReason)

    beat(db, "a", a.run_id, now - timedelta(seconds=11))  # a's process died 11 s ago
    result = tick(settings, instance, queue)
    assert isinstance(result, dg.SensorResult) and [r.tags[SLOT_TAG] for r in result.run_requests] == ["a"]
    assert instance.get_run_by_id(a.run_id).status == dg.DagsterRunStatus.STARTED  # Dagster cannot tell

    with db.write() as conn:  # b exits at its end: relaunched at the next tick, not 10 s later
        drains.end(conn, slot="b", run_id=b.run_id, now=utcnow())
    result = tick(settings, instance, queue)
    assert isinstance(result, dg.SensorResult) and [r.tags[SLOT_TAG] for r in result.run_requests] == ["a", "b"]


def test_without_a_lifetime_the_sensor_requests_short_runs_only_when_something_is_due(
    db: Database, settings: Settings, instance: dg.DagsterInstance
) -> None:
    assert isinstance(tick(settings, instance, WebhookQueue()), dg.SkipReason)


class LongRun:
    """One long-lived drain run of a slot, executing in a thread as the daemon's worker would."""

    def __init__(self, settings: Settings, instance: dg.DagsterInstance, slot: str, lifetime_s: float) -> None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        (settings.data_dir / "instance.key").write_text(WEBHOOK_KEY + "\n")
        self.queue = WebhookQueue(lifetime_s=lifetime_s, max_workers=4)
        self.resources = {
            "database": DatabaseResource(url=settings.database_url),
            "webhook_queue": self.queue,
            "webhook_http": WebhookHttpClient(allow_private=True),
            "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
        }
        self.result: list[dg.ExecuteInProcessResult] = []
        self.thread = threading.Thread(
            target=lambda: self.result.append(
                webhook_deliveries_job.execute_in_process(
                    instance=instance, tags={SLOT_TAG: slot}, resources=self.resources
                )
            ),
            daemon=True,
        )

    def __enter__(self) -> LongRun:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.thread.join(timeout=60)


def wait_for(predicate: Callable[[], object], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def latency(receiver: Receiver, path: str) -> list[float]:
    out = []
    for r in receiver.at(path):
        created = datetime.fromisoformat(json.loads(r.body)["created_at"].replace("Z", "+00:00"))
        out.append(r.received_at - created.timestamp())
    return out


@pytest.mark.both_backends(reason="the wake-up is PostgreSQL's LISTEN/NOTIFY against SQLite's poll")
def test_a_long_lived_drain_sends_within_a_fraction_of_a_second_then_ends_and_frees_its_slot(
    db: Database, settings: Settings, instance: dg.DagsterInstance, workspace: dict, receiver: Receiver
) -> None:
    add(db, workspace, receiver.url + "/a")
    started = time.monotonic()
    with LongRun(settings, instance, "a", lifetime_s=4.0) as run:
        assert wait_for(lambda: "a" in slots(db), 30), "the run never beat"
        for i in range(10):
            emit(db, workspace, i)
            time.sleep(0.1)
        assert wait_for(lambda: len(receiver.at("/a")) == 10, 5)
        assert max(latency(receiver, "/a")) < 2.0  # the p99 (typically 10-200 ms here)
        assert slots(db)["a"].alive(utcnow(), stale_after_s=10)
    assert run.result and run.result[0].success
    assert time.monotonic() - started < 20  # it ended at its lifetime (plus the run's own start)
    assert not slots(db)["a"].alive(utcnow(), stale_after_s=10)  # freed: the sensor relaunches it


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh PostgreSQL database alone: SQLite has no listening connection to lose."""
    yield from fresh_database_url(request, "postgres", tmp_path)


@pytest.mark.postgres
def test_a_drain_whose_listening_connection_was_killed_listens_again_and_misses_nothing(
    postgres_url: str, tmp_path: Path, instance: dg.DagsterInstance, receiver: Receiver
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=postgres_url)
    db = database_for(postgres_url)
    with db.write() as conn:
        workspace = bootstrap(conn, name="Acme Fitness")
    add(db, workspace, receiver.url + "/a")
    with LongRun(settings, instance, "a", lifetime_s=5.0):
        assert wait_for(lambda: "a" in slots(db), 30)
        emit(db, workspace, 0)
        assert wait_for(lambda: len(receiver.at("/a")) == 1, 5)
        with db.write() as conn:
            killed = conn.execute(
                sa.text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE query = 'LISTEN flokit_webhooks'"
                )
            ).scalar_one()
        assert killed == 1
        emit(db, workspace, 1)  # sent while nobody listens: the drain looks on reconnecting
        assert wait_for(lambda: len(receiver.at("/a")) == 2, 5)


def slots(db: Database) -> dict[str, drains.DrainSlot]:
    with db.read() as conn:
        return drains.slots(conn)


def test_a_drain_run_launched_by_hand_without_a_slot_drains_once_and_ends(
    db: Database, settings: Settings, instance: dg.DagsterInstance, workspace: dict, receiver: Receiver
) -> None:
    """An operator's run from the Dagster UI carries no slot tag: it must not hold a worker for a
    whole lifetime, whatever the deployment's lifetime."""
    add(db, workspace, receiver.url + "/a")
    emit(db, workspace)
    run = LongRun(settings, instance, "a", lifetime_s=900)
    started = time.monotonic()
    result = webhook_deliveries_job.execute_in_process(instance=instance, resources=run.resources)
    assert result.success and time.monotonic() - started < 30
    assert len(receiver.at("/a")) == 1 and slots(db) == {}
