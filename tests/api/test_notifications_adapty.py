"""Adapty webhooks through the gateway's provider path: the configured Authorization value, events
in Adapty's documented shape ("Webhook event types and fields"), applied to the ledger with the
S3 export's event ids."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from flask.testing import FlaskClient

from tests.support.notifications import adapty_event, adapty_time
from tests.support.provider_notifications import connect, entitlement, landed, settings, stored_count
from transforms.integrations.subscription_provider_b import event_id as export_event_id
from warehouse.db import Database

__all__ = ["settings"]

AUTH = "adapty-webhook-secret-0123456789"
PATH = "/api/providers/subscription_provider_b/webhook"


def integration(db: Database, workspace: dict[str, Any]) -> str:
    raw = {
        "bucket": "adapty-exports",
        "access_key_id": "AKIA0123456789",
        "secret_access_key": "s" * 40,
        "webhook_authorization": AUTH,
        "app_id": workspace["app_id"],
    }
    return connect(db, workspace["workspace_id"], "subscription_provider_b", raw)


def post(client: FlaskClient, integration_id: str, body: Any, auth: str = AUTH) -> Any:
    return client.post(
        f"{PATH}?integration={integration_id}",
        data=json.dumps(body).encode(),
        headers={"Authorization": auth, "Content-Type": "application/json"},
    )


def test_a_wrong_authorization_is_401_and_nothing_is_stored(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = integration(db, workspace)
    now = datetime.now(UTC)
    r = post(client, integration_id, adapty_event("subscription_started", now), auth="Bearer " + AUTH)
    assert r.status_code == 401
    assert stored_count(db) == 0


def test_started_grants_renewed_lands_the_exports_ids_and_expired_ends_access(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    r = post(client, integration_id, adapty_event("subscription_started", start))
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "iap"}

    renewed = adapty_event(
        "subscription_renewed", start + timedelta(minutes=1), transaction_id="GPA.3383-0000-0000-00002"
    )
    assert post(client, integration_id, renewed).status_code == 200
    expired_at = start + timedelta(minutes=2)
    expired = adapty_event("subscription_expired", expired_at, expires=expired_at)
    assert post(client, integration_id, expired).status_code == 200
    assert entitlement(client, workspace, "user-7") == {"active": False, "source": "iap"}

    events = {e["event_id"]: e for e in landed(db) if e["event_type"] in ("subscription_start", "renewal")}
    first = export_event_id(
        "GPA.3383-0000-0000-00001", "subscription_start", profile=None, vendor_type="subscription_started", at=start
    )
    again = export_event_id(
        "GPA.3383-0000-0000-00002", "renewal", profile=None, vendor_type="subscription_renewed", at=start
    )
    assert set(events) == {first, again}
    assert events[first]["user_id"] == "user-7" and events[first]["properties"]["revenue"] == 4.99


def test_a_refund_ends_access_and_a_duplicate_is_applied_once(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    start = datetime.now(UTC) - timedelta(hours=1)
    post(client, integration_id, adapty_event("subscription_started", start))
    refund = adapty_event("subscription_refunded", start + timedelta(minutes=5), cancellation_reason="refund")
    assert post(client, integration_id, refund).json["status"] == "applied"
    assert post(client, integration_id, refund).json["status"] == "duplicate"
    assert entitlement(client, workspace, "user-7")["active"] is False
    assert [e["event_type"] for e in landed(db)].count("refund") == 1


def test_a_trial_and_the_grace_period_access_level_updated_states(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    now = datetime.now(UTC)
    trial = adapty_event("trial_started", now - timedelta(days=3), expires=now - timedelta(hours=1))
    post(client, integration_id, trial)
    assert entitlement(client, workspace, "user-7")["active"] is False  # the trial ran out
    # The conversion failed to charge: Adapty's access level says access lasts through the grace period.
    grace = adapty_event(
        "access_level_updated",
        now - timedelta(minutes=30),
        expires=now - timedelta(hours=1),
        access_level_id="premium",
        is_active=True,
        is_in_grace_period=True,
        expires_at=adapty_time(now + timedelta(days=6)),
        will_renew=True,
    )
    assert post(client, integration_id, grace).status_code == 200
    assert entitlement(client, workspace, "user-7")["active"] is True


def test_a_body_without_an_event_is_acknowledged_and_not_stored(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    r = post(client, integration_id, {})
    assert r.status_code == 200 and r.json["status"] == "ignored"
    assert stored_count(db) == 0
