"""POST /v1/webhooks/test: queues a sample event whose delivery appears in the history."""

from __future__ import annotations

import json

import pytest
from flask.testing import FlaskClient

from tests.support import WEBHOOK_KEY, bearer
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.tables import webhook_events


def add(db: Database, workspace: dict, events: list[str], url: str = "http://127.0.0.1:9/hook") -> str:
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


def test_test_webhook_queues_a_sample_delivery(client: FlaskClient, db: Database, workspace: dict) -> None:
    subscribed = add(db, workspace, ["action.approved"])
    add(db, workspace, ["integration.error"])
    r = client.post(
        "/v1/webhooks/test", json={"event_type": "action.approved"}, headers=bearer(workspace["api_key_read_write"])
    )
    assert r.status_code == 202
    assert r.json["delivery_id"].startswith("dlv_") and r.json["event_id"].startswith("evt_")
    assert r.json["deliveries"] == [{"delivery_id": r.json["delivery_id"], "endpoint_id": subscribed}]
    with db.read() as conn:
        [row] = deliveries.history(conn, endpoint_id=subscribed)
        body = json.loads(conn.execute(webhook_events.select()).one().body)
    assert row["delivery_id"] == r.json["delivery_id"] and row["test"] is True and row["status"] == "pending"
    assert body["test"] is True and body["type"] == "action.approved" and body["data"]["action"]["id"] == "act_sample"
    assert body["workspace_id"] == workspace["workspace_id"]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: webhooks/outbox.py")
def test_test_webhook_to_one_endpoint_even_unsubscribed(client: FlaskClient, db: Database, workspace: dict) -> None:
    target = add(db, workspace, ["integration.error"])
    r = client.post(
        "/v1/webhooks/test",
        json={"event_type": "report.payback_updated", "endpoint_id": target},
        headers=bearer(workspace["api_key_read_write"]),
    )
    assert r.status_code == 202 and r.json["deliveries"][0]["endpoint_id"] == target


def test_test_webhook_errors(client: FlaskClient, db: Database, workspace: dict) -> None:
    rw = bearer(workspace["api_key_read_write"])
    r = client.post("/v1/webhooks/test", json={"event_type": "action.approved"}, headers=rw)
    assert r.status_code == 400 and r.json["error"] == "invalid_request"
    assert "No enabled webhook endpoint" in r.json["message"]
    with db.read() as conn:  # the refused test left no event behind
        assert conn.execute(webhook_events.select()).first() is None
    add(db, workspace, ["action.approved"])
    r = client.post("/v1/webhooks/test", json={"event_type": "action.deleted"}, headers=rw)
    assert r.status_code == 400 and "Unknown event_type" in r.json["message"]
    r = client.post("/v1/webhooks/test", json={"type": "action.approved"}, headers=rw)
    assert r.status_code == 400 and r.json["error"] == "invalid_request"
    r = client.post("/v1/webhooks/test", data="nope", headers=rw, content_type="application/json")
    assert r.status_code == 400
    r = client.post("/v1/webhooks/test", json={"event_type": "action.approved", "endpoint_id": "whe_nope"}, headers=rw)
    assert r.status_code == 404 and r.json["error"] == "not_found"
    r = client.post(
        "/v1/webhooks/test",
        json={"event_type": "action.approved"},
        headers=bearer(workspace["api_key_read_only"]),
    )
    assert r.status_code == 403 and r.json["error"] == "forbidden"
    assert client.post("/v1/webhooks/test", json={"event_type": "action.approved"}).status_code == 401


def test_another_workspaces_endpoint_is_404_and_nothing_is_queued(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    """Tenancy is the query's (`get_endpoint` filters on the key's workspace): another workspace's
    enabled, subscribed endpoint answers exactly as an unknown one."""
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    theirs = add(db, other, ["action.approved"])
    rw = bearer(workspace["api_key_read_write"])
    answers = [
        client.post("/v1/webhooks/test", json={"event_type": "action.approved", "endpoint_id": endpoint}, headers=rw)
        for endpoint in (theirs, "whe_doesnotexist")
    ]
    assert [r.status_code for r in answers] == [404, 404]
    assert answers[0].json == {"error": "not_found", "message": f"No webhook endpoint {theirs}"}
    assert answers[1].json == {"error": "not_found", "message": "No webhook endpoint whe_doesnotexist"}
    with db.read() as conn:
        assert conn.execute(webhook_events.select()).first() is None
    # Their own key reaches it.
    mine = client.post(
        "/v1/webhooks/test",
        json={"event_type": "action.approved", "endpoint_id": theirs},
        headers=bearer(other["api_key_read_write"]),
    )
    assert mine.status_code == 202 and mine.json["deliveries"][0]["endpoint_id"] == theirs
