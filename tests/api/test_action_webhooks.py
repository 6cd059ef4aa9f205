"""Action transitions emit their webhook events through the outbox, in the same transaction."""

import json

from flask.testing import FlaskClient

from tests.support import WEBHOOK_KEY, bearer
from tests.support.actions import seed_queue
from warehouse.db import Database
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.tables import webhook_events

ACTION_EVENTS = ["action.created", "action.approved", "action.rolled_back"]


def test_create_approve_and_rollback_reach_a_subscribed_endpoint(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="http://127.0.0.1:9/hook",
            events=ACTION_EVENTS,
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
        running = {a.status: a for a in seed_queue(conn, workspace_id=workspace["workspace_id"])}["running"]
    with db.read() as conn:  # the demo seeding itself went through the same transitions
        seeded = {json.loads(r.body)["data"]["action"]["id"] for r in conn.execute(webhook_events.select())}
    rw = bearer(workspace["api_key_read_write"])
    created = client.post(
        "/v1/actions", json={"workspace_id": workspace["workspace_id"], "type": "shift_budget"}, headers=rw
    ).json["id"]
    assert client.post(f"/v1/actions/{created}/approve", json={"approved_by": "maya"}, headers=rw).status_code == 200
    assert client.post(f"/v1/actions/{running.id}/rollback", headers=rw).status_code == 200
    # A refused transition (409) emits nothing.
    assert client.post(f"/v1/actions/{created}/approve", json={"approved_by": "maya"}, headers=rw).status_code == 409

    with db.read() as conn:
        bodies = [
            json.loads(r.body) for r in conn.execute(webhook_events.select().order_by(webhook_events.c.created_at))
        ]
        history = deliveries.history(conn, endpoint_id=endpoint.id, limit=1000)
    fresh = [(b["type"], b["data"]["action"]["id"]) for b in bodies if b["data"]["action"]["id"] not in seeded]
    assert fresh == [("action.created", created), ("action.approved", created)]
    assert ("action.rolled_back", running.id) in [(b["type"], b["data"]["action"]["id"]) for b in bodies]
    approved = next(b for b in bodies if b["type"] == "action.approved" and b["data"]["action"]["id"] == created)
    assert approved["data"]["action"]["approved_by"] == "maya" and approved["workspace_id"] == workspace["workspace_id"]
    assert len(history) == len(bodies)  # one delivery per event for the one subscribed endpoint
