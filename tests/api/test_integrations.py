"""The v1 integrations endpoints: list, detail with sync_stats, queue a sync (spec "Integration")."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support import bearer
from tests.support.integrations import ADJUST, KEY, connect
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.integrations.tables import integration_syncs, integrations


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/stats.py")
def test_list_and_detail_show_exactly_the_spec_fields(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    r = client.get("/v1/integrations", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 200
    assert r.json == {
        "integrations": [
            {
                "id": integration_id,
                "type": "attribution_provider_a",
                "status": "connected",
                "last_synced_at": None,
                "error_message": None,
            }
        ]
    }
    assert integration_id.startswith("int_")
    r = client.get(f"/v1/integrations/{integration_id}", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 200
    assert r.json["integration"]["sync_stats"] == {"events_last_24h": 0, "events_total": 0, "earliest_event_at": None}
    assert set(r.json["integration"]) == {"id", "type", "status", "last_synced_at", "error_message", "sync_stats"}


def test_credentials_are_sealed_and_only_their_last_four_characters_kept(db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.read() as conn:
        row = conn.execute(integrations.select().where(integrations.c.id == integration_id)).one()
        assert ADJUST["api_token"] not in str(row.credentials) and ADJUST["api_token"] not in str(row.options)
        assert row.credential_hints == {"api_token": "…cdef"}
        config = repo.config_of(conn, integration_id=integration_id, instance_key=KEY)
    assert config.get("api_token") == ADJUST["api_token"] and config.get("base_url") == "http://127.0.0.1:9"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/repository.py")
def test_sync_answers_202_and_the_same_sync_id_while_pending(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    rw = bearer(workspace["api_key_read_write"])
    first = client.post(f"/v1/integrations/{integration_id}/sync", headers=rw)
    assert first.status_code == 202 and first.json["status"] == "ok" and first.json["sync_id"].startswith("sync_")
    again = client.post(f"/v1/integrations/{integration_id}/sync", headers=rw)
    assert again.status_code == 202 and again.json == first.json
    with db.read() as conn:
        rows = conn.execute(integration_syncs.select()).all()
    assert [(r.id, r.trigger, r.status) for r in rows] == [(first.json["sync_id"], "manual", "queued")]


@pytest.mark.both_backends(reason="a race: concurrent requests queue one sync through each backend's locking")
def test_concurrent_sync_requests_queue_one_sync(app: Any, db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    rw = bearer(workspace["api_key_read_write"])
    answers: list[str] = []
    barrier = threading.Barrier(6)

    def post() -> None:
        client = app.test_client()
        barrier.wait()
        r = client.post(f"/v1/integrations/{integration_id}/sync", headers=rw)
        assert r.status_code == 202
        answers.append(r.json["sync_id"])

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(answers) == 6 and len(set(answers)) == 1
    with db.read() as conn:
        assert len(conn.execute(integration_syncs.select()).all()) == 1


def test_sync_needs_a_read_write_key(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    r = client.post(f"/v1/integrations/{integration_id}/sync", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 403 and r.json["error"] == "forbidden"


def test_a_disconnected_integration_cannot_sync(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        gone = repo.disconnect(conn, integration_id=integration_id, actor="ops@example.com")
        assert gone.status == "disconnected" and gone.credential_hints == {}
        row = conn.execute(integrations.select().where(integrations.c.id == integration_id)).one()
        assert row.credentials is None
    r = client.post(f"/v1/integrations/{integration_id}/sync", headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 409 and r.json["error"] == "conflict" and "disconnected" in r.json["message"]


@pytest.mark.parametrize("method", ["get", "post"])
def test_another_workspaces_integration_is_not_found(
    client: FlaskClient, db: Database, workspace: dict, method: str
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    integration_id = connect(db, other["workspace_id"])
    path = f"/v1/integrations/{integration_id}" + ("/sync" if method == "post" else "")
    r = getattr(client, method)(path, headers=bearer(workspace["api_key_read_write"]))
    assert r.status_code == 404 and r.json["error"] == "not_found"
    assert client.get("/v1/integrations", headers=bearer(workspace["api_key_read_only"])).json == {"integrations": []}


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/repository.py")
def test_one_integration_per_workspace_and_type_and_one_spend_source(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    first = connect(db, ws)
    with pytest.raises(repo.AlreadyExists, match="already has a attribution_provider_a"):
        connect(db, ws)
    appsflyer = {"api_token": "af-token-0123456789abcdef", "app_id": "id123456789"}
    with pytest.raises(repo.Conflict, match="one spend source"):
        connect(db, ws, "attribution_provider_b", appsflyer)
    with db.write() as conn:
        repo.disconnect(conn, integration_id=first, actor="ops@example.com")
    assert connect(db, ws) == first  # connected again: same id


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/stats.py")
def test_the_app_store_sync_counts_the_stores_events(client: FlaskClient, db: Database, workspace: dict) -> None:
    """`ios_store_connect` lands events as `ios_store` (the ids the receipts and notifications
    share), and its `sync_stats` count them; another workspace's do not count."""
    from datetime import UTC, datetime, timedelta

    from transforms.events import canonical_event
    from warehouse.events.landing import land

    pem = "-----BEGIN PRIVATE KEY-----\nMIGTAgEAMBMG\n-----END PRIVATE KEY-----\n"
    raw = {"issuer_id": "i", "key_id": "k", "private_key": pem, "app_id": workspace["app_id"]}
    integration_id = connect(db, workspace["workspace_id"], "ios_store_connect", raw)
    now = datetime.now(UTC)
    with db.write() as conn:
        other = bootstrap(conn, name="Other")["workspace_id"]
        events = [
            canonical_event(
                source="ios_store", workspace_id=ws, event_type="renewal", occurred_at=now - timedelta(days=2),
                received_at=now, event_id=f"ios:{n}:renewal", user_id="u1",
            )
            for n, ws in ((1, workspace["workspace_id"]), (2, workspace["workspace_id"]), (3, other))
        ]  # fmt: skip
        land(conn, events)
    detail = client.get(f"/v1/integrations/{integration_id}", headers=bearer(workspace["api_key_read_only"]))
    stats = detail.json["integration"]["sync_stats"]
    assert (stats["events_total"], stats["events_last_24h"]) == (2, 2)
