"""Webhook endpoints over v1 (issue 36 part 4): create, list, read, change, delete, rotate, and the
Standard Webhooks opt-in, with real deliveries to a local receiver where sending is the point."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from flask.testing import FlaskClient
from standardwebhooks.webhooks import Webhook

from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.support import WEBHOOK_KEY
from tests.support.webhook_api import BASE, api, local_app, receiver, ro, rw
from tests.support.webhook_receiver import Receiver
from transforms.webhooks.verify import verify
from warehouse import audit
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_deliveries, webhook_endpoints

__all__ = ["api", "local_app", "receiver"]  # fixtures (tests/support/webhook_api.py)


def deliver(db: Database) -> None:
    """One drain, as the Dagster job runs it: every due delivery is sent and recorded."""
    drain(db, WebhookQueue(max_workers=4), WebhookHttpClient(allow_private=True), logging.getLogger("t"), WEBHOOK_KEY)


def emit(db: Database, workspace: dict[str, Any], event_type: str = "action.approved", **data: Any) -> str:
    with db.write() as conn:
        return emit_event(conn, workspace_id=workspace["workspace_id"], event_type=event_type, data=data)


def create(api: FlaskClient, workspace: dict[str, Any], url: str, **fields: Any) -> dict[str, Any]:
    r = api.post(BASE, json={"url": url, "event_types": ["action.approved"], **fields}, headers=rw(workspace))
    assert r.status_code == 201, r.json
    return r.json


def test_an_endpoint_is_created_read_listed_and_its_secret_shown_once(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    made = create(api, workspace, receiver.url + "/a", event_types=["action.approved", "integration.error"])
    endpoint, secret = made["endpoint"], made["secret"]
    assert secret.startswith("whsec_")
    assert endpoint["id"].startswith("whe_") and endpoint["url"] == receiver.url + "/a"
    assert endpoint["event_types"] == ["action.approved", "integration.error"]
    assert endpoint["enabled"] is True and endpoint["standard_webhooks"] is False
    assert endpoint["disabled_reason"] is None and endpoint["created_at"].endswith("Z")
    read = api.get(f"{BASE}/{endpoint['id']}", headers=ro(workspace))
    assert read.status_code == 200 and read.json == {"endpoint": endpoint}
    listed = api.get(BASE, headers=ro(workspace))
    assert listed.status_code == 200 and listed.json == {"endpoints": [endpoint]}
    assert secret not in read.text + listed.text
    # The secret shown is the one that signs.
    emit(db, workspace)
    deliver(db)
    [got] = receiver.at("/a")
    assert verify(got.body, got.all("Service-Signature"), [secret], got.now_ms)
    with db.read() as conn:
        [entry] = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=endpoint["id"])
    assert entry["action"] == "webhook_endpoint.created" and entry["actor"].startswith("key_")  # the key's id


def test_created_disabled_nothing_is_sent_until_enabled(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint = create(api, workspace, receiver.url + "/a", enabled=False)["endpoint"]
    assert endpoint["enabled"] is False and endpoint["disabled_reason"] == "manual"
    emit(db, workspace)
    deliver(db)
    assert receiver.at("/a") == []
    r = api.patch(f"{BASE}/{endpoint['id']}", json={"enabled": True}, headers=rw(workspace))
    assert r.status_code == 200 and r.json["endpoint"]["enabled"] is True
    deliver(db)
    assert len(receiver.at("/a")) == 1


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/endpoints.py update_endpoint")
def test_patch_changes_url_and_types_and_enabling_resets_the_failure_streak(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint_id = create(api, workspace, receiver.url + "/down")["endpoint"]["id"]
    receiver.status["/down"] = 500
    for i in range(5):
        emit(db, workspace, n=i)
    deliver(db)
    r = api.get(f"{BASE}/{endpoint_id}", headers=ro(workspace))
    assert r.json["endpoint"]["enabled"] is False
    assert r.json["endpoint"]["disabled_reason"] == "consecutive_failures"
    r = api.patch(
        f"{BASE}/{endpoint_id}",
        json={"url": receiver.url + "/up", "event_types": ["action.created"], "enabled": True},
        headers=rw(workspace),
    )
    assert r.status_code == 200
    assert r.json["endpoint"]["url"] == receiver.url + "/up"
    assert r.json["endpoint"]["event_types"] == ["action.created"]
    assert r.json["endpoint"]["enabled"] is True and r.json["endpoint"]["disabled_reason"] is None
    with db.read() as conn:
        streak = (
            conn.execute(webhook_endpoints.select().where(webhook_endpoints.c.id == endpoint_id))
            .one()
            .consecutive_failures
        )
        actions = [
            e["action"] for e in audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=endpoint_id)
        ]
    assert streak == 0
    assert actions[-2:] == ["webhook_endpoint.updated", "webhook_endpoint.enabled"]
    emit(db, workspace, "action.approved")  # no longer subscribed
    emit(db, workspace, "action.created")
    deliver(db)  # to the new URL (the five failed deliveries wait for their retries, 30 s later)
    assert [json.loads(r.body)["type"] for r in receiver.at("/up")] == ["action.created"]


def test_toggling_standard_webhooks_changes_the_headers_of_real_deliveries(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    made = create(api, workspace, receiver.url + "/a")
    endpoint_id, secret = made["endpoint"]["id"], made["secret"]
    emit(db, workspace)
    deliver(db)
    assert receiver.at("/a")[-1].all("webhook-signature") == []
    r = api.patch(f"{BASE}/{endpoint_id}", json={"standard_webhooks": True}, headers=rw(workspace))
    assert r.status_code == 200 and r.json["endpoint"]["standard_webhooks"] is True
    emit(db, workspace)
    deliver(db)
    got = receiver.at("/a")[-1]
    assert Webhook(secret).verify(got.body, dict(got.headers))["type"] == "action.approved"
    api.patch(f"{BASE}/{endpoint_id}", json={"standard_webhooks": False}, headers=rw(workspace))
    emit(db, workspace)
    deliver(db)
    assert receiver.at("/a")[-1].all("webhook-id") == []


def test_rotation_answers_a_new_secret_that_signs_beside_the_old_one(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    made = create(api, workspace, receiver.url + "/a")
    r = api.post(f"{BASE}/{made['endpoint']['id']}/rotate-secret", headers=rw(workspace))
    assert r.status_code == 200 and r.json["endpoint"] == made["endpoint"]
    new = r.json["secret"]
    assert new.startswith("whsec_") and new != made["secret"]
    emit(db, workspace)
    deliver(db)
    [got] = receiver.at("/a")
    for secret in (new, made["secret"]):
        assert verify(got.body, got.all("Service-Signature"), [secret], got.now_ms)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/endpoints.py delete_endpoint")
def test_a_deleted_endpoint_is_gone_and_its_queued_deliveries_stop(
    api: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    endpoint = create(api, workspace, receiver.url + "/a")["endpoint"]
    emit(db, workspace)
    r = api.delete(f"{BASE}/{endpoint['id']}", headers=rw(workspace))
    assert r.status_code == 200 and r.json == {"endpoint": endpoint}
    for method in ("get", "delete", "patch"):
        gone = getattr(api, method)(f"{BASE}/{endpoint['id']}", json={}, headers=rw(workspace))
        assert gone.status_code == 404 and gone.json["error"] == "not_found"
    assert api.get(BASE, headers=ro(workspace)).json == {"endpoints": []}
    emit(db, workspace)
    deliver(db)
    assert receiver.at("/a") == []
    with db.read() as conn:
        rows = conn.execute(webhook_deliveries.select()).all()
        [deleted] = [
            e for e in audit.entries(conn, workspace_id=workspace["workspace_id"]) if e["action"].endswith("deleted")
        ]
    assert [(d.status, d.last_error) for d in rows] == [("failed", "endpoint deleted")]
    assert deleted["detail"]["stopped_deliveries"] == 1 and deleted["detail"]["events"] == ["action.approved"]


def test_bad_input_keys_and_other_workspaces(
    api: FlaskClient, client: FlaskClient, db: Database, workspace: dict[str, Any], receiver: Receiver
) -> None:
    # The instance's rules: HTTPS to public addresses unless private ones are allowed.
    r = client.post(BASE, json={"url": "http://127.0.0.1/a", "event_types": ["action.approved"]}, headers=rw(workspace))
    assert r.status_code == 400 and r.json["error"] == "invalid_request" and r.json["message"].startswith("url:")
    for bad in (
        {"url": receiver.url, "event_types": ["action.deleted"]},
        {"url": receiver.url, "event_types": []},
        {"url": receiver.url},
        {"url": receiver.url, "event_types": ["action.approved"], "secret": "mine"},
        {"url": "ftp://example.com/x", "event_types": ["action.approved"]},
    ):
        r = api.post(BASE, json=bad, headers=rw(workspace))
        assert r.status_code == 400 and r.json["error"] == "invalid_request", bad
    endpoint_id = create(api, workspace, receiver.url + "/a")["endpoint"]["id"]
    assert api.patch(f"{BASE}/{endpoint_id}", json={"url": "gopher://x"}, headers=rw(workspace)).status_code == 400
    # Read-only keys read, and change nothing.
    assert api.get(f"{BASE}/{endpoint_id}", headers=ro(workspace)).status_code == 200
    for method, path, body in (
        ("post", BASE, {"url": receiver.url, "event_types": ["action.approved"]}),
        ("patch", f"{BASE}/{endpoint_id}", {"enabled": False}),
        ("delete", f"{BASE}/{endpoint_id}", None),
        ("post", f"{BASE}/{endpoint_id}/rotate-secret", None),
    ):
        r = getattr(api, method)(path, json=body, headers=ro(workspace))
        assert r.status_code == 403 and r.json["error"] == "forbidden", path
        assert getattr(api, method)(path, json=body).status_code == 401
    # Another workspace's endpoint is not found, for reads and changes alike.
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    for method in ("get", "patch", "delete"):
        r = getattr(api, method)(f"{BASE}/{endpoint_id}", json={}, headers=rw(other))
        assert r.status_code == 404, method
    assert api.post(f"{BASE}/{endpoint_id}/rotate-secret", headers=rw(other)).status_code == 404
    assert api.get(BASE, headers=ro(other)).json == {"endpoints": []}
    assert api.get(f"{BASE}/{endpoint_id}", headers=ro(workspace)).json["endpoint"]["enabled"] is True
