"""Android receipts, verified in-house against a Play Developer API on 127.0.0.1.

FloKit calls the fake with Google's own client (`google-api-python-client`, `google-auth`): the
service account signs its token request, the fake checks that signature, and only the token it
issued opens the API. The answer and the user's entitlement follow the subscription's state.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from tests.providers.google_play_fake import FakeGooglePlay, product, provision, settings_for, subscription
from tests.providers.google_play_support import gateway_for
from tests.support import free_port
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.events.tables import landed_events
from warehouse.settings import Settings

NOW = datetime.now(UTC)
DAY = timedelta(days=1)


@pytest.fixture
def play() -> Iterator[FakeGooglePlay]:
    with FakeGooglePlay() as fake:
        yield fake


@pytest.fixture
def gateway(settings: Settings, db: Database, workspace: dict[str, Any], play: FakeGooglePlay) -> FlaskClient:
    provision(db, workspace["app_id"], play)
    return gateway_for(settings, play)


def receipt(token: str, package: str = "com.acme.fit", **extra: str) -> dict[str, Any]:
    return {"provider": "android_store", "packageName": package, "purchaseToken": token, **extra}


def headers(workspace: dict[str, Any], user: str = "user-1") -> dict[str, str]:
    return {"x-user-id": user, "x-app-key": workspace["app_key"]}


def entitled(client: FlaskClient, workspace: dict[str, Any], user: str = "user-1") -> bool:
    answer = client.get("/api/paywall/entitlement", headers=headers(workspace, user))
    assert answer.status_code == 200
    return bool(answer.json["active"])


def test_an_active_subscription_is_verified_recorded_and_acknowledged_once(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    expires = NOW + 20 * DAY
    play.subscriptions["tok-active"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=expires)
    assert not entitled(gateway, workspace)

    answer = gateway.post("/api/paywall/receipt", json=receipt("tok-active"), headers=headers(workspace))

    assert answer.status_code == 200, answer.json
    body = dict(answer.json)
    answered_expiry = datetime.fromisoformat(body.pop("expires_at").replace("Z", "+00:00"))
    assert body == {
        "active": True,
        "provider": "android_store",
        "product_id": "pro_monthly",
        "environment": "production",
        "original_transaction_id": "tok-active",
        "in_trial": False,
    }
    assert abs(answered_expiry - expires) < timedelta(milliseconds=1)
    assert answer.headers["Cache-Control"] == "private, no-store"
    assert entitled(gateway, workspace)
    assert play.calls.acknowledged == [("subscriptions", "pro_monthly", "tok-active")]
    assert play.calls.tokens_issued == 1

    again = gateway.post("/api/paywall/receipt", json=receipt("tok-active"), headers=headers(workspace))
    assert again.status_code == 200 and again.json["active"] is True
    assert play.calls.acknowledged == [("subscriptions", "pro_monthly", "tok-active")]  # once

    with db.read() as conn:
        events = conn.execute(sa.select(landed_events.c.event_id, landed_events.c.user_id, landed_events.c.properties))
        landed = {row.event_id: row for row in events}
    start = landed["gp:GPA.3301-0000-1111-22222:subscription_start"]
    assert start.user_id == "user-1"
    assert (start.properties["revenue"], start.properties["currency"]) == (9.99, "EUR")
    assert len(landed) == 1  # the second receipt of the same order landed nothing new


def test_a_grace_period_keeps_access_and_on_hold_does_not(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]
) -> None:
    play.subscriptions["tok-grace"] = subscription("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", expires=NOW + 3 * DAY)
    grace = gateway.post("/api/paywall/receipt", json=receipt("tok-grace"), headers=headers(workspace, "u-grace"))
    assert grace.status_code == 200 and grace.json["active"] is True
    assert entitled(gateway, workspace, "u-grace")

    # On hold, expiryTime may still lie ahead; Google says no access.
    play.subscriptions["tok-hold"] = subscription("SUBSCRIPTION_STATE_ON_HOLD", expires=NOW + 5 * DAY)
    hold = gateway.post("/api/paywall/receipt", json=receipt("tok-hold"), headers=headers(workspace, "u-hold"))
    assert hold.status_code == 200 and hold.json["active"] is False
    assert not entitled(gateway, workspace, "u-hold")
    assert ("subscriptions", "pro_monthly", "tok-hold") not in play.calls.acknowledged


def test_an_expired_subscription_is_200_inactive_and_recorded_for_later_notifications(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-old"] = subscription(
        "SUBSCRIPTION_STATE_EXPIRED", expires=NOW - 2 * DAY, auto_renew=False, acknowledged=True
    )
    answer = gateway.post("/api/paywall/receipt", json=receipt("tok-old"), headers=headers(workspace))
    assert answer.status_code == 200
    assert answer.json["active"] is False
    assert not entitled(gateway, workspace)
    with db.read() as conn:
        grant = ledger.grant_for(conn, app_id=workspace["app_id"], source="android_store", store_key="tok-old")
    assert grant is not None and grant.user_id == "user-1"


def test_canceled_with_time_left_stays_active_until_expiry(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-cxl"] = subscription(
        "SUBSCRIPTION_STATE_CANCELED",
        expires=NOW + 9 * DAY,
        auto_renew=False,
        acknowledged=True,
        canceled={"userInitiatedCancellation": {"cancelTime": "2026-11-20T10:00:00Z"}},
    )
    answer = gateway.post("/api/paywall/receipt", json=receipt("tok-cxl"), headers=headers(workspace))
    assert answer.status_code == 200 and answer.json["active"] is True
    with db.read() as conn:
        grant = ledger.grant_for(conn, app_id=workspace["app_id"], source="android_store", store_key="tok-cxl")
    assert grant is not None and grant.auto_renew is False
    with db.read() as conn:
        later = ledger.current(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id="user-1",
            now=NOW + 10 * DAY,
        )  # fmt: skip
    assert later.active is False  # the paid time ran out, no notification needed


def test_unknown_tokens_and_packages_are_422_and_record_nothing(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    unknown = gateway.post("/api/paywall/receipt", json=receipt("tok-nobody"), headers=headers(workspace))
    assert unknown.status_code == 422
    assert "purchase token" in unknown.json["error"]
    other = gateway.post(
        "/api/paywall/receipt", json=receipt("tok-nobody", "com.other.app"), headers=headers(workspace)
    )
    assert other.status_code == 422
    assert "no tenant provisioned" in other.json["error"].lower()
    with db.read() as conn:
        assert ledger.grants_of(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"],
                                user_id="user-1") == []  # fmt: skip
    assert not entitled(gateway, workspace)


def test_a_purchase_belongs_to_its_buyer(gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]) -> None:
    play.subscriptions["tok-mine"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    assert gateway.post("/api/paywall/receipt", json=receipt("tok-mine"), headers=headers(workspace)).status_code == 200
    thief = gateway.post("/api/paywall/receipt", json=receipt("tok-mine"), headers=headers(workspace, "thief"))
    assert thief.status_code == 422
    assert not entitled(gateway, workspace, "thief")
    assert entitled(gateway, workspace, "user-1")


def test_the_obfuscated_account_id_must_name_the_user(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]
) -> None:
    play.subscriptions["tok-named"] = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY, account_id="user-1"
    )
    other = gateway.post("/api/paywall/receipt", json=receipt("tok-named"), headers=headers(workspace, "user-2"))
    assert other.status_code == 422
    assert not entitled(gateway, workspace, "user-2")
    assert play.calls.acknowledged == []  # refused purchases are not acknowledged
    owner = gateway.post("/api/paywall/receipt", json=receipt("tok-named"), headers=headers(workspace, "user-1"))
    assert owner.status_code == 200 and owner.json["active"] is True


def test_a_linked_purchase_token_continues_the_first_purchase(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-first"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 2 * DAY)
    gateway.post("/api/paywall/receipt", json=receipt("tok-first"), headers=headers(workspace))
    # An upgrade: a new token linking to the first; the first is then cancelled as replaced.
    play.subscriptions["tok-upgrade"] = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 30 * DAY, product="pro_yearly", order="GPA.3301-5555-6666-77777",
        linked="tok-first",
    )  # fmt: skip
    play.subscriptions["tok-first"] = subscription(
        "SUBSCRIPTION_STATE_EXPIRED", expires=NOW - DAY, canceled={"replacementCancellation": {}}, acknowledged=True
    )
    upgraded = gateway.post("/api/paywall/receipt", json=receipt("tok-upgrade"), headers=headers(workspace))
    assert upgraded.status_code == 200
    assert upgraded.json["original_transaction_id"] == "tok-first"
    assert upgraded.json["product_id"] == "pro_yearly"
    # The replaced token states nothing: it cannot switch the continued purchase off.
    stale = gateway.post("/api/paywall/receipt", json=receipt("tok-first"), headers=headers(workspace))
    assert stale.status_code == 422
    assert entitled(gateway, workspace)
    with db.read() as conn:
        grants = ledger.grants_of(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"],
                                  user_id="user-1")  # fmt: skip
    # Keyed by the first token, re-read by the newest (what the sync asks Google for).
    assert [(g.store_key, g.product_id, g.current_token) for g in grants] == [
        ("tok-first", "pro_yearly", "tok-upgrade")
    ]


def test_a_one_time_product_needs_its_product_id_and_grants_for_good(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]
) -> None:
    play.products[("lifetime_unlock", "tok-life")] = product()
    without = gateway.post("/api/paywall/receipt", json=receipt("tok-life"), headers=headers(workspace))
    assert without.status_code == 422 and "productId" in without.json["error"]
    answer = gateway.post(
        "/api/paywall/receipt", json=receipt("tok-life", productId="lifetime_unlock"), headers=headers(workspace)
    )
    assert answer.status_code == 200, answer.json
    assert (answer.json["active"], answer.json["expires_at"], answer.json["product_id"]) == (
        True,
        None,
        "lifetime_unlock",
    )
    assert play.calls.acknowledged == [("products", "lifetime_unlock", "tok-life")]
    assert entitled(gateway, workspace)


def test_a_test_purchase_is_sandbox(gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]) -> None:
    play.subscriptions["tok-test"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, test=True)
    answer = gateway.post("/api/paywall/receipt", json=receipt("tok-test"), headers=headers(workspace))
    assert answer.status_code == 200 and answer.json["environment"] == "sandbox"


def test_a_store_that_is_unreachable_is_502_and_a_silent_one_504(
    settings: Settings, db: Database, workspace: dict[str, Any], play: FakeGooglePlay
) -> None:
    provision(db, workspace["app_id"], play)
    play.subscriptions["tok-active"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    closed = replace(settings_for(settings, play), google_play_api_url=f"http://127.0.0.1:{free_port()}/")
    down = create_app(closed).test_client()
    answer = down.post("/api/paywall/receipt", json=receipt("tok-active"), headers=headers(workspace))
    assert answer.status_code == 502

    play.delay_s = 1.5
    slow = gateway_for(settings, play, timeout_s=0.5)
    answer = slow.post("/api/paywall/receipt", json=receipt("tok-active"), headers=headers(workspace))
    assert answer.status_code == 504
    assert not entitled(slow, workspace)


def test_a_service_account_google_refuses_is_502(
    settings: Settings, db: Database, workspace: dict[str, Any], play: FakeGooglePlay
) -> None:
    from tests.providers.google_play_fake import _rsa_pem

    _, stranger = _rsa_pem()
    provision(db, workspace["app_id"], play, account=play.service_account_info(private_key=stranger))
    play.subscriptions["tok-active"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    client = gateway_for(settings, play)
    answer = client.post("/api/paywall/receipt", json=receipt("tok-active"), headers=headers(workspace))
    assert answer.status_code == 502
    assert play.calls.token_refused == 1 and play.calls.gets == []


def test_a_failed_acknowledgement_keeps_the_verdict_and_is_retried_by_the_next_receipt(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any]
) -> None:
    play.subscriptions["tok-ack"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    play.acknowledge_status = 503
    first = gateway.post("/api/paywall/receipt", json=receipt("tok-ack"), headers=headers(workspace))
    assert first.status_code == 200 and first.json["active"] is True
    assert play.calls.acknowledged == []
    play.acknowledge_status = None
    gateway.post("/api/paywall/receipt", json=receipt("tok-ack"), headers=headers(workspace))
    assert play.calls.acknowledged == [("subscriptions", "pro_monthly", "tok-ack")]
