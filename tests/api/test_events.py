"""POST /v1/events: validated, landed through the ingest landing path with source "api", idempotent."""

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support import bearer
from warehouse.db import Database
from warehouse.events.tables import landed_events

EVENT = {
    "event": "purchase",
    "user_id": "user_42",
    "timestamp": "2026-11-20T18:04:05Z",
    "properties": {"campaign_id": "cmp_1", "product_id": "annual", "price": 59.99, "currency": "USD"},
}


def landed(db: Database) -> list:
    with db.read() as conn:
        return conn.execute(sa.select(landed_events).order_by(landed_events.c.seq)).all()


def test_event_lands_with_source_api(client: FlaskClient, db: Database, workspace: dict) -> None:
    r = client.post("/v1/events", json=EVENT, headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 202 and r.json["status"] == "accepted" and r.json["event_id"].startswith("evt_")
    [row] = landed(db)
    assert (row.event_id, row.workspace_id, row.source) == (r.json["event_id"], workspace["workspace_id"], "api")
    assert (row.event_type, row.user_id, row.day) == ("purchase", "user_42", "2026-11-20")
    assert row.properties == EVENT["properties"]


def test_resent_events_are_duplicates(client: FlaskClient, db: Database, workspace: dict) -> None:
    rw = bearer(workspace["api_key_read_write"])
    first = client.post("/v1/events", json=EVENT, headers=rw).json
    again = client.post("/v1/events", json=EVENT, headers=rw).json
    assert again == {"event_id": first["event_id"], "status": "duplicate"}
    other = client.post("/v1/events", json={**EVENT, "properties": {"price": 1}}, headers=rw).json
    assert other["status"] == "accepted" and other["event_id"] != first["event_id"]
    with_id = {**EVENT, "event_id": "order-1001"}
    assert client.post("/v1/events", json=with_id, headers=rw).json == {"event_id": "order-1001", "status": "accepted"}
    moved = {**with_id, "timestamp": "2026-11-20T18:04:06Z"}
    assert client.post("/v1/events", json=moved, headers=rw).json == {"event_id": "order-1001", "status": "duplicate"}
    assert len(landed(db)) == 3


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"event": None}, "event"),
        ({"event": ""}, "event"),
        ({"event": "has space"}, "event"),
        ({"user_id": 42}, "user_id"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"timestamp": 1732125845}, "timestamp"),
        ({"timestamp": "2023-12-31T23:59:59Z"}, "timestamp"),  # before the lake's first day
        ({"timestamp": "2099-01-01T00:00:00Z"}, "timestamp"),  # more than a day ahead
        ({"properties": ["a"]}, "properties"),
        ({"event_id": ""}, "event_id"),
    ],
)
def test_invalid_events_are_400_naming_the_field(
    client: FlaskClient, db: Database, workspace: dict, change: dict, field: str
) -> None:
    body = {k: v for k, v in {**EVENT, **change}.items() if v is not None}
    r = client.post("/v1/events", json=body, headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 400 and r.json["error"] == "invalid_request" and f"'{field}'" in r.json["message"]
    assert landed(db) == []


def test_events_need_a_read_write_key(client: FlaskClient, workspace: dict) -> None:
    r = client.post("/v1/events", json=EVENT, headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 403 and r.json["error"] == "forbidden"
    assert client.post("/v1/events", json=EVENT).status_code == 401
