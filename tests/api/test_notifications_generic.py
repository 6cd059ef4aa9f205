"""The generic provider paths through the gateway: FloKit's JSON formats, signed with FloKit's
`Service-Signature` scheme (the sender signs as FloKit's own outbound webhooks do) under the
app's generic secret (`set_stores(..., new_generic_secret=True)`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.notifications.framework import NOT_VERIFIED
from tests.support.notifications import SUBSCRIPTION, iso, post, purchase
from tests.support.provider_notifications import KEY, entitlement, landed, settings, stored_count
from warehouse.db import Database
from warehouse.entitlements.stores import StoresUpdate, set_stores

__all__ = ["settings"]

ATTRIBUTION = "/api/integrations/mmp/generic-attribution"


@pytest.fixture
def secret(db: Database, workspace: dict[str, Any]) -> str:
    with db.write() as conn:
        made = set_stores(
            conn, app_id=workspace["app_id"], update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert made is not None
    return made


def test_a_signed_purchase_grants_and_a_refund_revokes(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    app_id = workspace["app_id"]
    r = post(client, SUBSCRIPTION, app_id, purchase(), secret)
    assert r.status_code == 200 and r.json["status"] == "applied", r.json
    assert entitlement(client, workspace, "user-7") == {"active": True, "source": "web"}
    refund = purchase("refund", id="evt_2", occurred_at=iso(datetime.now(UTC) - timedelta(minutes=1)))
    assert post(client, SUBSCRIPTION, app_id, refund, secret).status_code == 200
    assert entitlement(client, workspace, "user-7")["active"] is False
    kinds = {e["event_type"]: e["properties"].get("revenue") for e in landed(db)}
    assert kinds == {"subscription_start": 9.99, "refund": -9.99}


def test_a_bad_signature_or_an_unknown_app_is_401_and_nothing_is_stored(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    r = post(client, SUBSCRIPTION, workspace["app_id"], purchase(), "whsec_not_the_apps_secret")
    assert r.status_code == 401 and r.json == {"error": NOT_VERIFIED}
    r = post(client, SUBSCRIPTION, "app_unknown", purchase(), secret)
    assert r.status_code == 401
    unsigned = client.post(f"{SUBSCRIPTION}?app={workspace['app_id']}", json=purchase())
    assert unsigned.status_code == 401
    assert stored_count(db) == 0
    assert entitlement(client, workspace, "user-7")["active"] is False


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/stores.py")
def test_a_body_outside_the_format_is_400_naming_the_field(
    client: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    body = purchase()
    del body["expires_at"]
    r = post(client, SUBSCRIPTION, workspace["app_id"], body, secret)
    assert r.status_code == 400 and "expires_at" in r.json["error"]


def test_a_signed_attribution_event_lands_once(client: FlaskClient, db: Database, workspace: dict, secret: str) -> None:
    body = {
        "id": "att_1",
        "event_type": "install",
        "occurred_at": iso(datetime.now(UTC) - timedelta(minutes=2)),
        "user_id": "user-7",
        "idfa": "00000000-0000-0000-0000-0000000000aa",
        "platform": "ios",
        "country": "DE",
        "network": "Meta",
        "campaign": "spring",
    }
    r = post(client, ATTRIBUTION, workspace["app_id"], body, secret)
    assert r.status_code == 200 and r.json["events_landed"] == 1, r.json
    assert post(client, ATTRIBUTION, workspace["app_id"], body, secret).json["status"] == "duplicate"
    [event] = landed(db)
    assert event["event_type"] == "install" and event["source"] == "generic-attribution"
    assert event["platform"] == "ios" and event["country"] == "DE" and event["user_id"] == "user-7"
    assert event["properties"]["campaign"] == "spring"
