"""Recovery over v1 (issue 36 part 4): an endpoint's deliveries, resending one, and recovering
everything not delivered since an instant, sent for real to a local receiver by the drain."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from tests.support.webhook_api import BASE, api, local_app, receiver, ro, rw
from tests.support.webhook_receiver import Received, Receiver
from transforms.webhooks.verify import verify
from warehouse import audit
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.webhooks import delivery_queue
from warehouse.webhooks.delivery_queue import SendResult
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_deliveries, webhook_endpoints

__all__ = ["api", "local_app", "receiver"]  # fixtures (tests/support/webhook_api.py)


def deliver(db: Database, backoff_scale: float = 1.0) -> None:
    """One drain, as the Dagster job runs it: every due delivery is sent and recorded (with
    `backoff_scale` 0 the retries are due at once, so a failing delivery runs out of them)."""
    queue = WebhookQueue(max_workers=4, backoff_scale=backoff_scale)
    drain(db, queue, WebhookHttpClient(allow_private=True), logging.getLogger("t"), WEBHOOK_KEY)


def emit(db: Database, workspace: dict[str, Any], event_type: str = "action.approved", **data: Any) -> str:
    with db.write() as conn:
        return emit_event(conn, workspace_id=workspace["workspace_id"], event_type=event_type, data=data)


def create(api: FlaskClient, workspace: dict[str, Any], url: str) -> tuple[str, str]:
    r = api.post(BASE, json={"url": url, "event_types": ["action.approved", "action.created"]}, headers=rw(workspace))
    assert r.status_code == 201, r.json
    return r.json["endpoint"]["id"], r.json["secret"]


def streak(db: Database, endpoint_id: str) -> tuple[str, int]:
    with db.read() as conn:
        row = conn.execute(webhook_endpoints.select().where(webhook_endpoints.c.id == endpoint_id)).one()
    return row.status, row.consecutive_failures


def deliveries(api: FlaskClient, workspace: dict[str, Any], endpoint_id: str, **query: Any) -> Any:
    r = api.get(f"{BASE}/{endpoint_id}/deliveries", query_string=query, headers=ro(workspace))
    assert r.status_code == 200, r.json
    return r.json


def event_ids(received: list[Received]) -> list[str]:
    return [json.loads(r.body)["id"] for r in received]


def test_the_deliveries_list_names_statuses_for_clients_filters_and_pages(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint_id, _ = create(api, workspace, receiver.url + "/a")
    delivered = emit(db, workspace, "action.approved")
    deliver(db)
    receiver.status["/a"] = 503
    waiting = emit(db, workspace, "action.created")
    deliver(db)
    page = deliveries(api, workspace, endpoint_id)
    assert page["has_more"] is False
    newest, oldest = page["deliveries"]
    assert newest["event_id"] == waiting and newest["event_type"] == "action.created"
    assert newest["status"] == "pending" and newest["attempts"] == 1 and newest["response_status"] == 503
    assert oldest["event_id"] == delivered and oldest["status"] == "delivered" and oldest["response_status"] == 200
    assert oldest["id"].startswith("dlv_") and oldest["last_attempt_at"].endswith("Z")
    assert [d["event_id"] for d in deliveries(api, workspace, endpoint_id, status="pending")["deliveries"]] == [waiting]
    assert [d["event_id"] for d in deliveries(api, workspace, endpoint_id, status="delivered")["deliveries"]] == [
        delivered
    ]
    assert deliveries(api, workspace, endpoint_id, status="failed")["deliveries"] == []
    assert [
        d["event_id"] for d in deliveries(api, workspace, endpoint_id, event_type="action.approved")["deliveries"]
    ] == [delivered]
    first = deliveries(api, workspace, endpoint_id, limit=1)
    assert first["has_more"] is True and first["deliveries"] == [newest]
    rest = deliveries(api, workspace, endpoint_id, limit=1, starting_after=newest["id"])
    assert rest == {"deliveries": [oldest], "has_more": False}
    for bad in ({"status": "succeeded"}, {"limit": 0}, {"limit": 101}, {"starting_after": "dlv_nope"}):
        r = api.get(f"{BASE}/{endpoint_id}/deliveries", query_string=bad, headers=ro(workspace))
        assert r.status_code == 400 and r.json["error"] == "invalid_request", bad
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    assert api.get(f"{BASE}/{endpoint_id}/deliveries", headers=ro(other)).status_code == 404


@pytest.mark.both_backends(reason="a race: a resend against a drain's lease, one conditional UPDATE")
def test_a_resend_sends_the_same_event_again_freshly_signed_outside_the_failure_streak(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint_id, secret = create(api, workspace, receiver.url + "/a")
    event_id = emit(db, workspace)
    deliver(db)
    [dlv] = deliveries(api, workspace, endpoint_id)["deliveries"]
    r = api.post(f"/v1/webhooks/deliveries/{dlv['id']}/resend", headers=rw(workspace))
    assert r.status_code == 202 and r.json == {"status": "queued", "deliveries": [dlv["id"]]}
    assert deliveries(api, workspace, endpoint_id)["deliveries"][0]["status"] == "pending"
    deliver(db)
    first, again = receiver.at("/a")
    assert again.body == first.body and json.loads(again.body)["id"] == event_id
    assert again.header("Service-Event-Id") == event_id and again.header("Service-Delivery-Id") == dlv["id"]
    assert (first.header("Service-Attempt"), again.header("Service-Attempt")) == ("1", "2")
    assert verify(again.body, again.all("Service-Signature"), [secret], again.now_ms)
    assert again.header("Service-Signature") != first.header("Service-Signature")
    [after] = deliveries(api, workspace, endpoint_id)["deliveries"]
    assert after["status"] == "delivered" and after["attempts"] == 2

    # Failed resends count in no streak: six in a row leave the endpoint enabled and the delivery delivered.
    receiver.status["/a"] = 500
    for _ in range(6):
        assert api.post(f"/v1/webhooks/deliveries/{dlv['id']}/resend", headers=rw(workspace)).status_code == 202
        deliver(db)
    assert len(receiver.at("/a")) == 8
    assert streak(db, endpoint_id) == ("enabled", 0)
    [after] = deliveries(api, workspace, endpoint_id)["deliveries"]
    assert after["status"] == "delivered" and after["attempts"] == 8 and after["response_status"] == 500

    # A pending retry is replaced by the resend, not doubled; the retry after it still comes.
    waiting = emit(db, workspace, "action.created")
    deliver(db)  # fails: a retry is scheduled 30 s later, and the streak counts it
    assert streak(db, endpoint_id) == ("enabled", 1)
    pending = deliveries(api, workspace, endpoint_id, status="pending")["deliveries"][0]
    assert api.post(f"/v1/webhooks/deliveries/{pending['id']}/resend", headers=rw(workspace)).status_code == 202
    deliver(db)
    deliver(db)
    assert event_ids(receiver.at("/a")).count(waiting) == 2
    assert streak(db, endpoint_id) == ("enabled", 1)
    with db.read() as conn:
        row = conn.execute(webhook_deliveries.select().where(webhook_deliveries.c.id == pending["id"])).one()
        entries = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=dlv["id"])
    assert row.status == "pending" and row.attempt == 2 and row.next_attempt_at > utcnow()
    assert [e["action"] for e in entries] == ["webhook_delivery.resent"] * 7
    assert entries[0]["detail"]["status"] == "succeeded" and entries[0]["actor"].startswith("key_")


@pytest.mark.both_backends(reason="a race: a resend against a drain's lease, one conditional UPDATE")
def test_a_resend_never_doubles_a_send_under_way_and_takes_over_a_dead_runs_lease(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint_id, _ = create(api, workspace, receiver.url + "/a")
    emit(db, workspace)
    with db.write() as conn:  # a live drain holds it
        [claimed] = delivery_queue.claim(
            conn, now=utcnow(), limit=10, lease=timedelta(seconds=20), instance_key=WEBHOOK_KEY
        )
    r = api.post(f"/v1/webhooks/deliveries/{claimed.delivery_id}/resend", headers=rw(workspace))
    assert r.status_code == 409 and r.json["error"] == "conflict" and "being sent right now" in r.json["message"]
    with db.write() as conn:  # that drain dies; another claims it and its lease lapses too
        delivery_queue.release(conn, [claimed])
        [dead] = delivery_queue.claim(  # a lease already over: its holder is gone
            conn, now=utcnow(), limit=10, lease=timedelta(seconds=-1), instance_key=WEBHOOK_KEY
        )
    assert api.post(f"/v1/webhooks/deliveries/{dead.delivery_id}/resend", headers=rw(workspace)).status_code == 202
    now = utcnow()
    with db.write() as conn:  # the dead run's late record changes nothing
        assert delivery_queue.record(conn, dead, SendResult(500, None, now, now)).status == "lost"
    deliver(db)
    assert len(receiver.at("/a")) == 1
    assert deliveries(api, workspace, endpoint_id)["deliveries"][0]["status"] == "delivered"
    assert streak(db, endpoint_id) == ("enabled", 0)


def test_resend_refusals(api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver) -> None:
    endpoint_id, _ = create(api, workspace, receiver.url + "/a")
    emit(db, workspace)
    [dlv] = deliveries(api, workspace, endpoint_id)["deliveries"]
    path = f"/v1/webhooks/deliveries/{dlv['id']}/resend"
    assert api.post(path, headers=ro(workspace)).status_code == 403
    assert api.post(path).status_code == 401
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    assert api.post(path, headers=rw(other)).status_code == 404
    assert api.post("/v1/webhooks/deliveries/dlv_nope/resend", headers=rw(workspace)).status_code == 404
    assert api.delete(f"{BASE}/{endpoint_id}", headers=rw(workspace)).status_code == 200
    assert api.post(path, headers=rw(workspace)).status_code == 404  # a deleted endpoint's


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/recovery.py recover")
def test_recover_sends_every_undelivered_event_since_once_and_is_idempotent(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint_id, _ = create(api, workspace, receiver.url + "/a")
    since = utcnow()
    ok = emit(db, workspace)  # delivered: not sent again
    deliver(db)
    receiver.status["/a"] = 500
    failed = emit(db, workspace)
    deliver(db, backoff_scale=0)  # five failures in a row: the endpoint is disabled
    assert api.patch(f"{BASE}/{endpoint_id}", json={"enabled": True}, headers=rw(workspace)).status_code == 200
    deliver(db, backoff_scale=0)  # the sixth and last attempt: failed for good
    with db.write() as conn:  # an event from before `since`, its retry waiting
        old = emit_event(
            conn,
            workspace_id=workspace["workspace_id"],
            event_type="action.approved",
            data={},
            now=since - timedelta(hours=2),
        )
    retrying = emit(db, workspace)
    deliver(db)  # both fail: retries in 30 s
    assert api.patch(f"{BASE}/{endpoint_id}", json={"enabled": False}, headers=rw(workspace)).status_code == 200
    never = emit(db, workspace)  # waits, never attempted, while the endpoint is disabled
    sent_before = len(receiver.at("/a"))
    by_event = {d["event_id"]: d for d in deliveries(api, workspace, endpoint_id, limit=100)["deliveries"]}
    assert [by_event[e]["status"] for e in (ok, failed, old, retrying, never)] == [
        "delivered", "failed", "pending", "pending", "pending",
    ]  # fmt: skip

    receiver.status["/a"] = 200
    path = f"{BASE}/{endpoint_id}/recover"
    r = api.post(path, json={"since": since.isoformat()}, headers=rw(workspace))
    assert r.status_code == 202 and r.json["status"] == "queued"
    assert set(r.json["deliveries"]) == {by_event[e]["id"] for e in (failed, retrying, never)}
    again = api.post(path, json={"since": since.isoformat()}, headers=rw(workspace))
    assert again.status_code == 202 and again.json["deliveries"] == []  # idempotent while they are due
    deliver(db)
    assert receiver.at("/a")[sent_before:] == []  # disabled: they wait
    assert api.patch(f"{BASE}/{endpoint_id}", json={"enabled": True}, headers=rw(workspace)).status_code == 200
    deliver(db)
    deliver(db)
    arrived = event_ids(receiver.at("/a")[sent_before:])
    assert sorted(arrived) == sorted([failed, retrying, never])  # once each; not `ok`, not `old` (before since)
    assert streak(db, endpoint_id) == ("enabled", 0)
    statuses = {d["event_id"]: d["status"] for d in deliveries(api, workspace, endpoint_id, limit=100)["deliveries"]}
    assert statuses == {ok: "delivered", failed: "delivered", old: "pending", retrying: "delivered", never: "delivered"}
    with db.read() as conn:
        entries = [
            e for e in audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=endpoint_id)
            if e["action"] == "webhook_endpoint.recovered"
        ]  # fmt: skip
    assert [e["detail"]["deliveries"] for e in entries] == [3, 0]


def test_recover_refusals(api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver) -> None:
    endpoint_id, _ = create(api, workspace, receiver.url + "/a")
    path = f"{BASE}/{endpoint_id}/recover"
    for bad in (
        {"since": "2026-11-29T10:00:00"},
        {"since": "yesterday"},
        {"since": 1764410400},
        {},
        {"since": "2026-11-29T10:00:00Z", "x": 1},
    ):
        r = api.post(path, json=bad, headers=rw(workspace))
        assert r.status_code == 400 and r.json["error"] == "invalid_request", bad
    assert api.post(path, json={"since": "2026-11-29T10:00:00+01:00"}, headers=rw(workspace)).status_code == 202
    assert api.post(path, json={"since": "2026-11-29T10:00:00Z"}, headers=ro(workspace)).status_code == 403
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    assert api.post(path, json={"since": "2026-11-29T10:00:00Z"}, headers=rw(other)).status_code == 404
