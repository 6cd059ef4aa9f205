"""RevenueCat webhooks through the gateway's provider path: the configured Authorization value,
events in RevenueCat's documented shape (its "Sample Events"), applied to the ledger with the
RevenueCat sync's event ids."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.notifications.framework import NOT_VERIFIED
from tests.support.notifications import AUTH, DAY_MS, PATH, integration, now_ms, rc_event
from tests.support.provider_notifications import connect, entitlement, landed, settings, stored_count
from transforms.integrations.subscription_provider_a import event_id as sync_event_id
from warehouse.db import Database

__all__ = ["settings"]


def post(client: FlaskClient, integration_id: str, event: dict[str, Any], auth: str = AUTH) -> Any:
    body = json.dumps({"api_version": "1.0", "event": event}).encode()
    return client.post(
        f"{PATH}?integration={integration_id}",
        data=body,
        headers={"Authorization": auth, "Content-Type": "application/json"},
    )


def test_a_wrong_authorization_is_401_and_nothing_is_stored(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = integration(db, workspace)
    r = post(client, integration_id, rc_event("INITIAL_PURCHASE"), auth="Bearer guessed")
    assert r.status_code == 401
    r = post(client, integration_id, rc_event("INITIAL_PURCHASE"), auth="")
    assert r.status_code == 401
    assert stored_count(db) == 0
    assert entitlement(client, workspace, "user-7")["active"] is False


def test_an_integration_without_webhook_settings_refuses_and_logs_the_reason(
    client: FlaskClient, db: Database, workspace: dict, caplog: pytest.LogCaptureFixture
) -> None:
    integration_id = connect(
        db, workspace["workspace_id"], "subscription_provider_a", {"api_key": "sk_rc_01234567", "project_id": "proj1"}
    )
    r = post(client, integration_id, rc_event("INITIAL_PURCHASE"))
    assert r.status_code == 401 and r.json == {"error": NOT_VERIFIED}
    assert any("webhook_authorization" in getattr(record, "reason", "") for record in caplog.records)


def test_initial_purchase_grants_and_expiration_ends_access_with_the_syncs_event_ids(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    start = now_ms() - 60_000
    r = post(client, integration_id, rc_event("INITIAL_PURCHASE", at=start))
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "iap"}

    renewal = rc_event("RENEWAL", transaction_id="1000000222", at=start + 1000)
    assert post(client, integration_id, renewal).json["status"] == "applied"
    expired = rc_event("EXPIRATION", transaction_id="1000000222", at=start + 2000, expiration_reason="UNSUBSCRIBE")
    expired["expiration_at_ms"] = start + 1500
    assert post(client, integration_id, expired).status_code == 200
    assert entitlement(client, workspace, "user-7") == {"active": False, "source": "iap"}

    events = {e["event_id"]: e for e in landed(db)}
    # The ids the RevenueCat sync gives the same store transactions: a webhook and a sync land once.
    assert set(events) == {
        sync_event_id("1000000111", "subscription_start"),
        sync_event_id("1000000222", "renewal"),
    }
    first = events[sync_event_id("1000000111", "subscription_start")]
    assert first["user_id"] == "user-7" and first["source"] == "subscription_provider_a"
    assert {"revenue": 10.99, "currency": "USD"}.items() <= first["properties"].items()


def test_a_duplicate_event_id_is_applied_once(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = integration(db, workspace)
    event = rc_event("INITIAL_PURCHASE")
    assert post(client, integration_id, event).json["status"] == "applied"
    again = post(client, integration_id, event)
    assert again.status_code == 200 and again.json["status"] == "duplicate"
    assert stored_count(db) == 1 and len(landed(db)) == 1


def test_a_billing_issue_keeps_access_until_the_grace_period_ends(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    at = now_ms() - 60_000
    post(client, integration_id, rc_event("INITIAL_PURCHASE", at=at))
    # The period has ended, the renewal failed: RevenueCat reports the store's grace period.
    issue = rc_event("BILLING_ISSUE", at=at + 1000, grace_period_expiration_at_ms=now_ms() + 3 * DAY_MS)
    issue["expiration_at_ms"] = at + 500
    assert post(client, integration_id, issue).status_code == 200
    assert entitlement(client, workspace, "user-7")["active"] is True
    # Grace over (a later statement says it ended a moment ago): no access.
    over = rc_event("BILLING_ISSUE", at=at + 2000, grace_period_expiration_at_ms=now_ms() - 1000)
    over["expiration_at_ms"] = at + 500
    post(client, integration_id, over)
    assert entitlement(client, workspace, "user-7")["active"] is False


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/ledger.py")
def test_a_transfer_moves_access_from_one_user_to_the_other(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = integration(db, workspace)
    at = now_ms() - 60_000
    post(client, integration_id, rc_event("INITIAL_PURCHASE", user="user-old", at=at))
    assert entitlement(client, workspace, "user-old")["active"] is True
    transfer = {
        "id": str(uuid.uuid4()),
        "type": "TRANSFER",
        "app_id": "app1234",
        "event_timestamp_ms": at + 1000,
        "transferred_from": ["user-old"],
        "transferred_to": ["user-new"],
        "environment": "PRODUCTION",
        "store": "APP_STORE",
    }
    r = post(client, integration_id, transfer)
    assert r.status_code == 200 and r.json["purchases_changed"] == 1, r.json
    assert entitlement(client, workspace, "user-old")["active"] is False
    assert entitlement(client, workspace, "user-new") == {"active": True, "source": "iap"}


def test_a_customer_support_cancellation_is_a_refund_that_ends_access(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = integration(db, workspace)
    at = now_ms() - 60_000
    post(client, integration_id, rc_event("INITIAL_PURCHASE", at=at))
    refund = rc_event("CANCELLATION", at=at + 1000, cancel_reason="CUSTOMER_SUPPORT", price=-10.99)
    assert post(client, integration_id, refund).status_code == 200
    assert entitlement(client, workspace, "user-7")["active"] is False
    refunds = [e for e in landed(db) if e["event_type"] == "refund"]
    assert [e["event_id"] for e in refunds] == [sync_event_id("1000000111", "refund")]
    assert refunds[0]["properties"]["revenue"] == -10.99


def test_a_test_event_is_acknowledged_and_not_stored(client: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = integration(db, workspace)
    r = post(client, integration_id, rc_event("TEST"))
    assert r.status_code == 200 and r.json["status"] == "ignored"
    assert stored_count(db) == 0
