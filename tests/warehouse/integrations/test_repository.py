"""The integration and sync state machines as the repository keeps them (both databases)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.support import WEBHOOK_KEY
from transforms.integrations.kinds import validate_config
from warehouse.db import Database, utcnow
from warehouse.errors import TransitionRefused
from warehouse.integrations import repository as repo
from warehouse.webhooks import endpoints
from warehouse.webhooks.tables import webhook_deliveries, webhook_events

KEY = "k" * 43
CONFIG = {"api_token": "adjust-token-0123456789abcdef"}


@pytest.fixture
def integration_id(db: Database, workspace: dict) -> str:
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace["workspace_id"],
            integration_type="attribution_provider_a",
            config=validate_config("attribution_provider_a", CONFIG),
            instance_key=KEY,
            actor="ops@example.com",
        ).id


def started(db: Database, integration_id: str) -> str:
    with db.write() as conn:
        sync, created = repo.request_sync_for_operator(conn, integration_id=integration_id)
        assert created
        assert repo.start_sync(conn, sync_id=sync.id, run_id="run-1", instance_key=KEY) is not None
        assert repo.get_integration_for_operator(conn, integration_id=integration_id).status == "syncing"
    return sync.id


def events(db: Database) -> list[dict]:
    with db.read() as conn:
        return [json.loads(b) for b in conn.execute(sa.select(webhook_events.c.body)).scalars()]


def test_success_connects_and_sets_last_synced_at_to_the_end(db: Database, integration_id: str) -> None:
    sync_id = started(db, integration_id)
    end = utcnow()
    with db.write() as conn:
        sync = repo.finish_success(conn, sync_id=sync_id, records=12, earliest=None, state={"cursor": 3}, now=end)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert (sync.status, sync.records_written) == ("succeeded", 12)
    assert integration.status == "connected" and integration.last_synced_at == end


def test_a_refusal_is_error_with_the_message_and_one_integration_error(
    db: Database, workspace: dict, integration_id: str
) -> None:
    with db.write() as conn:
        endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="http://127.0.0.1:9/ops",
            events=["integration.error"],
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    sync_id = started(db, integration_id)
    with db.write() as conn:
        repo.finish_failure(conn, sync_id=sync_id, code="auth", message="HTTP 401: Invalid token", refused=True)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
        assert conn.execute(sa.select(sa.func.count()).select_from(webhook_deliveries)).scalar_one() == 1
    assert integration.status == "error" and integration.error_message == "HTTP 401: Invalid token"
    [event] = events(db)
    assert event["type"] == "integration.error"
    assert event["data"] == {
        "reason": "integration_sync_failed",
        "integration_id": integration_id,
        "integration_type": "attribution_provider_a",
        "sync_id": sync_id,
        "ad_account_id": None,
        "platform": None,
        "error_code": "auth",
        "message": "HTTP 401: Invalid token",
        "endpoint_id": None,
        "url": None,
        "consecutive_failures": None,
        "last_status_code": None,
        "last_error": None,
    }


def test_a_transient_failure_leaves_the_status_as_it_was(db: Database, integration_id: str) -> None:
    sync_id = started(db, integration_id)
    with db.write() as conn:
        sync = repo.finish_failure(conn, sync_id=sync_id, code="rate_limited", message="HTTP 429", refused=False)
        assert repo.get_integration_for_operator(conn, integration_id=integration_id).status == "connected"
    assert (sync.status, sync.error_code) == ("failed", "rate_limited")
    assert events(db) == []
    # In error, a transient failure keeps the error (only a success clears it).
    sync_id = started(db, integration_id)
    with db.write() as conn:
        repo.finish_failure(conn, sync_id=sync_id, code="auth", message="HTTP 403: no access", refused=True)
    sync_id = started(db, integration_id)
    with db.write() as conn:
        repo.finish_failure(conn, sync_id=sync_id, code="provider_error", message="HTTP 503", refused=False)
        integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
    assert integration.status == "error" and integration.error_message == "HTTP 403: no access"
    assert len(events(db)) == 1


def test_a_sync_ends_once(db: Database, integration_id: str) -> None:
    sync_id = started(db, integration_id)
    with db.write() as conn:
        repo.finish_failure(conn, sync_id=sync_id, code=None, message="the sync crashed", refused=False)
    with pytest.raises(TransitionRefused), db.write() as conn:
        repo.finish_success(conn, sync_id=sync_id, records=1, earliest=None, state={})
    with db.write() as conn:
        assert repo.start_sync(conn, sync_id=sync_id, run_id="run-2", instance_key=KEY) is None


def test_disconnecting_fails_the_queued_sync_and_a_running_one_leaves_the_status(
    db: Database, integration_id: str
) -> None:
    sync_id = started(db, integration_id)
    with db.write() as conn:
        repo.disconnect(conn, integration_id=integration_id, actor="ops@example.com")
        repo.finish_success(conn, sync_id=sync_id, records=3, earliest=None, state={})
        assert repo.get_integration_for_operator(conn, integration_id=integration_id).status == "disconnected"
        with pytest.raises(TransitionRefused):
            repo.config_of(conn, integration_id=integration_id, instance_key=KEY)


def test_scheduled_syncs_follow_the_stored_cadence(db: Database, integration_id: str) -> None:
    now = utcnow()
    with db.write() as conn:
        [first] = repo.enqueue_due(conn, now=now)  # never synced: due at once
        assert repo.enqueue_due(conn, now=now) == []  # pending
        assert repo.get_sync(conn, sync_id=first).trigger == "scheduled"
        repo.start_sync(conn, sync_id=first, run_id="r", instance_key=KEY, now=now)
        repo.finish_success(conn, sync_id=first, records=0, earliest=None, state={}, now=now)
        assert repo.enqueue_due(conn, now=now + timedelta(hours=23)) == []
        [second] = repo.enqueue_due(conn, now=now + timedelta(hours=24))
        assert second != first
