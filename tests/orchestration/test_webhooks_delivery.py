"""Webhook delivery end to end: outbox row -> sensor (build_sensor_context) -> real job run ->
real HTTP receiver on 127.0.0.1, on SQLite and PostgreSQL. The clock is injected through the
WebhookQueue resource's offset, so retries become due and rotation overlaps expire on demand."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import timedelta

import dagster as dg
import pytest
from standardwebhooks.exceptions import WebhookVerificationError
from standardwebhooks.webhooks import Webhook
from svix.webhooks import Webhook as SvixWebhook

from orchestration.definitions import build_definitions
from orchestration.resources import DatabaseResource, InstanceKeyResource
from orchestration.webhooks.drain import drain
from orchestration.webhooks.jobs import webhook_deliveries_job
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.webhooks.sensors import build_webhook_sensor
from tests.support import WEBHOOK_KEY
from tests.support.webhook_receiver import Received, Receiver, running_receiver
from transforms.webhooks.signing import new_signing_secret
from transforms.webhooks.verify import verify
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.webhooks import delivery_history, delivery_queue, endpoints
from warehouse.webhooks.outbox import emit_event

HOUR = 3600.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


class Pipeline:
    """The sensor and the job as the daemon would run them, with a movable clock."""

    def __init__(self, settings: Settings, instance: dg.DagsterInstance, receiver: Receiver) -> None:
        self.settings = settings
        self.instance = instance
        self.receiver = receiver
        self.cursor: str | None = None
        self.sensor = build_webhook_sensor(5)
        self.runs = 0
        # The instance key the runs unseal signing secrets with: the one `add` sealed them with.
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        (settings.data_dir / "instance.key").write_text(WEBHOOK_KEY + "\n")

    @property
    def offset_s(self) -> float:
        return self.receiver.offset_s

    @offset_s.setter
    def offset_s(self, value: float) -> None:
        self.receiver.offset_s = value

    def queue(self) -> WebhookQueue:
        return WebhookQueue(clock_offset_s=self.offset_s, backoff_scale=1.0, max_workers=4)

    def now_ms(self) -> int:
        return int(self.queue().now().timestamp() * 1000)

    def tick(self) -> int:
        """One sensor evaluation; each requested run executes for real. Returns runs started."""
        database = DatabaseResource(url=self.settings.database_url)
        context = dg.build_sensor_context(
            cursor=self.cursor, instance=self.instance, resources={"database": database, "webhook_queue": self.queue()}
        )
        result = self.sensor(context)
        if isinstance(result, dg.SkipReason):
            return 0
        self.cursor = result.cursor
        for request in result.run_requests:
            outcome = webhook_deliveries_job.execute_in_process(
                instance=self.instance,
                tags=request.tags,
                resources={
                    "database": database,
                    "webhook_queue": self.queue(),
                    "webhook_http": WebhookHttpClient(allow_private=True),
                    "instance_key": InstanceKeyResource(data_dir=str(self.settings.data_dir)),
                },
            )
            assert outcome.success
            self.runs += 1
        return len(result.run_requests)


@pytest.fixture
def pipeline(settings: Settings, instance: dg.DagsterInstance, receiver: Receiver) -> Pipeline:
    return Pipeline(settings, instance, receiver)


def add(db: Database, workspace: dict, url: str, events: list[str], standard: bool = False) -> tuple[str, str]:
    with db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url=url,
            events=events,
            allow_private=True,
            instance_key=WEBHOOK_KEY,
            standard_webhooks=standard,
        )
    return endpoint.id, secret


def emit(db: Database, workspace: dict, event_type: str, data: dict, now=None) -> str:
    with db.write() as conn:
        return emit_event(conn, workspace_id=workspace["workspace_id"], event_type=event_type, data=data, now=now)


def v1_values(r: Received) -> list[str]:
    return [p.removeprefix("v1=") for p in r.header("Service-Signature").split(",") if p.startswith("v1=")]


def test_delivery_headers_retries_disabling_and_recovery(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    a_id, a_secret = add(db, workspace, receiver.url + "/a", ["action.approved", "integration.error"])
    b_id, b_secret = add(db, workspace, receiver.url + "/b", ["integration.error"])
    add(db, workspace, receiver.url + "/c", ["report.payback_updated"])  # not subscribed: gets nothing

    # A delivered event: every header, verified with the reference verifier on the raw bytes.
    first = emit(db, workspace, "action.approved", {"action": {"id": "act_1", "status": "approved"}})
    assert pipeline.tick() == 1
    assert pipeline.tick() == 0  # nothing due any more: no run
    [got] = receiver.at("/a")
    assert receiver.at("/b") == [] and receiver.at("/c") == []
    assert got.header("Content-Type") == "application/json"
    assert len(got.all("Service-Signature")) == 1
    assert verify(got.body, got.all("Service-Signature"), [a_secret], got.now_ms).reason == "ok"
    assert not verify(got.body, got.all("Service-Signature"), [b_secret], got.now_ms)
    body = json.loads(got.body)
    assert body == {
        "id": first,
        "type": "action.approved",
        "created_at": body["created_at"],
        "workspace_id": workspace["workspace_id"],
        "data": {"action": {"id": "act_1", "status": "approved"}},
    }
    assert got.header("Service-Event-Id") == got.header("Idempotency-Key") == first
    assert got.header("Service-Attempt") == "1"
    with db.read() as conn:
        [row] = delivery_history.history(conn, endpoint_id=a_id)
    assert got.header("Service-Delivery-Id") == row.delivery_id
    assert row.status == "succeeded" and row.attempts[0].status_code == 200
    # The CLI's `webhooks deliveries --json` shape: the dashboard's excerpt and duration stay out.
    assert set(asdict(row)["attempts"][0]) == {"attempt", "status_code", "error", "started_at", "finished_at"}
    assert not any(k.lower().startswith("webhook-") for k, _ in got.headers)

    # The receiver fails: each retry (due after the backoff; the clock is moved past it) resends
    # the same bytes and event id with a fresh signature and a growing attempt number.
    receiver.status["/a"] = 500
    second = emit(db, workspace, "action.approved", {"action": {"id": "act_2"}})
    for _ in range(5):
        assert pipeline.tick() == 1
        pipeline.offset_s += 6 * HOUR + 1
    sends = [r for r in receiver.at("/a") if r.header("Service-Event-Id") == second]
    assert [r.header("Service-Attempt") for r in sends] == ["1", "2", "3", "4", "5"]
    assert len({r.body for r in sends}) == 1 and json.loads(sends[0].body)["id"] == second
    assert len({r.header("Service-Delivery-Id") for r in sends}) == 1
    assert len({r.header("Service-Signature") for r in sends}) == 5
    stamps = [int(r.header("Service-Signature").split(",")[0].removeprefix("t=")) for r in sends]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5

    # After 5 consecutive failures: endpoint disabled, integration.error to the other endpoint.
    with db.read() as conn:
        listed = {e.id: e for e in endpoints.list_endpoints(conn, workspace["workspace_id"])}
        [latest, _] = delivery_history.history(conn, endpoint_id=a_id)
    assert listed[a_id].status == "disabled" and listed[b_id].status == "enabled"
    assert latest.status == "pending" and latest.attempt == 5
    assert [x.status_code for x in latest.attempts] == [500] * 5
    [alert] = receiver.at("/b")
    assert verify(alert.body, alert.header("Service-Signature"), [b_secret], alert.now_ms)
    alert_body = json.loads(alert.body)
    assert alert_body["type"] == "integration.error"
    assert alert_body["data"]["endpoint_id"] == a_id and alert_body["data"]["reason"] == "webhook_endpoint_disabled"
    assert [r for r in receiver.at("/a") if json.loads(r.body)["type"] == "integration.error"] == []

    # Disabled: nothing is sent, even when due. Re-enabled: the paused delivery's 6th attempt.
    pipeline.offset_s += 7 * HOUR
    assert pipeline.tick() == 0
    receiver.status["/a"] = 200
    with db.write() as conn:
        endpoints.set_enabled(conn, endpoint_id=a_id, enabled=True)
    assert pipeline.tick() == 1
    last = receiver.at("/a")[-1]
    assert last.header("Service-Attempt") == "6" and last.body == sends[0].body
    assert verify(last.body, last.header("Service-Signature"), [a_secret], last.now_ms)
    with db.read() as conn:
        assert delivery_history.history(conn, endpoint_id=a_id)[0].status == "succeeded"


@pytest.mark.both_backends(
    reason="PostgreSQL coverage of warehouse/: webhooks/delivery_queue.py and delivery_history.py"
)
def test_exhausted_retries_mark_the_delivery_failed(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    a_id, _ = add(db, workspace, receiver.url + "/a", ["report.payback_updated"])
    receiver.status["/a"] = 503
    emit(db, workspace, "report.payback_updated", {"report": "payback"})
    for _ in range(4):  # four failures: still enabled
        pipeline.tick()
        pipeline.offset_s += 6 * HOUR + 1
    with db.write() as conn:  # an operator re-enable resets the streak without a success
        endpoints.set_enabled(conn, endpoint_id=a_id, enabled=True)
    for _ in range(3):
        pipeline.tick()
        pipeline.offset_s += 6 * HOUR + 1
    with db.read() as conn:
        [row] = delivery_history.history(conn, endpoint_id=a_id)
        assert endpoints.endpoint_for_operator(conn, a_id).status == "enabled"
    assert row.status == "failed" and row.attempt == 6 and row.next_attempt_at is None
    assert len(receiver.at("/a")) == 6


def test_rotation_signs_twice_for_24_hours_then_once(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    a_id, old = add(db, workspace, receiver.url + "/a", ["action.created"])
    with db.write() as conn:
        new, expires = endpoints.rotate_secret(
            conn, endpoint_id=a_id, instance_key=WEBHOOK_KEY, now=pipeline.queue().now()
        )
    emit(db, workspace, "action.created", {"n": 1})
    pipeline.tick()
    during = receiver.at("/a")[-1]
    assert len(v1_values(during)) == 2
    assert verify(during.body, during.header("Service-Signature"), [old], during.now_ms)
    assert verify(during.body, during.header("Service-Signature"), [new], during.now_ms)

    pipeline.offset_s += 24 * HOUR + 60  # past the overlap
    assert pipeline.queue().now() > expires
    emit(db, workspace, "action.created", {"n": 2}, now=pipeline.queue().now())
    pipeline.tick()
    after = receiver.at("/a")[-1]
    assert json.loads(after.body)["data"] == {"n": 2}
    assert len(v1_values(after)) == 1
    assert verify(after.body, after.header("Service-Signature"), [new], after.now_ms)
    assert verify(after.body, after.header("Service-Signature"), [old], after.now_ms).reason == ("signature_mismatch")


@pytest.mark.both_backends(
    reason="PostgreSQL coverage of warehouse/: webhooks/delivery_queue.py and delivery_history.py"
)
def test_standard_webhooks_library_verifies_a_delivery(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    _, secret = add(db, workspace, receiver.url + "/std", ["guardrail.triggered"], standard=True)
    event_id = emit(db, workspace, "guardrail.triggered", {"guardrail": "max_budget_shift"})
    pipeline.tick()
    [got] = receiver.at("/std")
    payload = Webhook(secret).verify(got.body, dict(got.headers))  # real clock: offset is 0 here
    assert payload["id"] == event_id and got.header("webhook-id") == event_id
    assert verify(got.body, got.header("Service-Signature"), [secret], got.now_ms)


def test_the_official_libraries_verify_every_delivery_during_a_rotation(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    """A receiver using the unmodified `standardwebhooks` or `svix` package (PyPI) verifies a real
    delivery with either secret while a rotation overlaps (two `v1` entries in webhook-signature),
    and refuses a body changed on the way or a secret it never had."""
    a_id, old = add(db, workspace, receiver.url + "/std", ["action.created"], standard=True)
    with db.write() as conn:
        new, _ = endpoints.rotate_secret(conn, endpoint_id=a_id, instance_key=WEBHOOK_KEY, now=pipeline.queue().now())
    event_id = emit(db, workspace, "action.created", {"n": 1})
    pipeline.tick()
    [got] = receiver.at("/std")
    headers = dict(got.headers)
    assert len(got.header("webhook-signature").split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(got.body, headers)["id"] == event_id  # real clock: offset is 0 here
        assert SvixWebhook(secret).verify(got.body, headers) is None  # svix raises on any mismatch
    forged = json.loads(got.body)
    forged["data"]["n"] = 2
    changed = json.dumps(forged).encode()
    for verifier in (Webhook(old), Webhook(new), SvixWebhook(old), SvixWebhook(new)):
        with pytest.raises(WebhookVerificationError):
            verifier.verify(changed, headers)
    stranger = new_signing_secret(b"s" * 32)
    for verifier in (Webhook(stranger), SvixWebhook(stranger)):
        with pytest.raises(WebhookVerificationError):
            verifier.verify(got.body, headers)


def test_unreachable_endpoint_records_a_network_error(db: Database, workspace: dict, pipeline: Pipeline) -> None:
    from tests.support import free_port

    a_id, _ = add(db, workspace, f"http://127.0.0.1:{free_port()}/gone", ["action.created"])
    emit(db, workspace, "action.created", {})
    pipeline.tick()
    with db.read() as conn:
        [row] = delivery_history.history(conn, endpoint_id=a_id)
    assert row.status == "pending" and row.status_code is None and "network error" in row.error
    assert row.next_attempt_at is not None


@pytest.mark.both_backends(
    reason="a race: claims use FOR UPDATE SKIP LOCKED on PostgreSQL and the write lock on SQLite"
)
def test_concurrent_claims_never_share_a_delivery(db: Database, workspace: dict) -> None:
    add(db, workspace, "http://127.0.0.1:9/x", ["action.created"])
    for i in range(10):
        emit(db, workspace, "action.created", {"i": i})
    queue = WebhookQueue()
    lease = timedelta(minutes=3)
    if db.is_sqlite:  # BEGIN IMMEDIATE serializes claimers: the second sees the first's leases
        with db.write() as c1:
            first = delivery_queue.claim(c1, now=queue.now(), limit=6, lease=lease, instance_key=WEBHOOK_KEY)
        with db.write() as c2:
            second = delivery_queue.claim(c2, now=queue.now(), limit=6, lease=lease, instance_key=WEBHOOK_KEY)
    else:  # two open transactions at once: SKIP LOCKED hands each its own rows
        with db.write() as c1:
            first = delivery_queue.claim(c1, now=queue.now(), limit=6, lease=lease, instance_key=WEBHOOK_KEY)
            with db.write() as c2:
                second = delivery_queue.claim(c2, now=queue.now(), limit=6, lease=lease, instance_key=WEBHOOK_KEY)
    ids1, ids2 = {c.delivery_id for c in first}, {c.delivery_id for c in second}
    assert len(ids1) == 6 and len(ids2) == 4 and not ids1 & ids2


def test_definitions_wire_the_sensor_and_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLOKIT_SENSOR_INTERVAL_S", "2")
    repo = build_definitions().get_repository_def()
    sensor = repo.get_sensor_def("webhook_deliveries_sensor")
    assert sensor.minimum_interval_seconds == 2 and sensor.job_name == "webhook_deliveries_job"
    assert repo.get_job("webhook_deliveries_job").executor_def.name == "in_process"


def test_sensor_requests_no_second_run_while_one_waits(
    db: Database, workspace: dict, receiver: Receiver, pipeline: Pipeline
) -> None:
    add(db, workspace, receiver.url + "/a", ["action.created"])
    emit(db, workspace, "action.created", {})
    waiting = pipeline.instance.create_run_for_job(webhook_deliveries_job)  # NOT_STARTED, like a queued run
    assert pipeline.tick() == 0 and receiver.at("/a") == []
    pipeline.instance.report_run_canceled(waiting)
    assert pipeline.tick() == 1 and len(receiver.at("/a")) == 1


@pytest.mark.both_backends(reason="a race: two drainers claim under each backend's locks")
def test_two_concurrent_drainers_never_send_a_delivery_twice(db: Database, workspace: dict, receiver: Receiver) -> None:
    """Two drains at once, small claims so that they interleave: every delivery arrives once."""
    add(db, workspace, receiver.url + "/a", ["action.created"])
    for i in range(60):
        emit(db, workspace, "action.created", {"i": i})
    queue, http = WebhookQueue(batch_size=4, max_workers=2), WebhookHttpClient(allow_private=True)
    log = logging.getLogger("test.drain")
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda _: drain(db, queue, http, log, WEBHOOK_KEY), range(2)))
    delivered = [r.header("Service-Delivery-Id") for r in receiver.at("/a")]
    assert sum(r.counts["succeeded"] for r in reports) == 60
    assert len(delivered) == 60 and len(set(delivered)) == 60
