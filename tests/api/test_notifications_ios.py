"""App Store Server Notifications V2 through the gateway path (`POST /webhooks/ios_store`, handed
to FloKit's processor in-process), signed by this test's root -> intermediate -> leaf chain."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.notifications.framework import Context, replay
from tests.providers.apple_pki import DAY_MS, ApplePki, now_ms, renewal, transaction
from tests.support.ios import active, landed, notify, pki_settings_fields, receipt, set_up_ios, stored
from transforms.purchases.ios_store import moment
from warehouse.db import Database, utcnow
from warehouse.settings import Settings

HOUR_MS = 3_600_000


@pytest.fixture
def pki(tmp_path: Path) -> ApplePki:
    return ApplePki(tmp_path / "apple")


@pytest.fixture
def settings(settings: Settings, pki: ApplePki) -> Settings:
    return replace(settings, **pki_settings_fields(pki))


@pytest.fixture
def ios(db: Database, workspace: dict[str, Any], client: FlaskClient, pki: ApplePki) -> dict[str, Any]:
    """An app set up for the bundle id, and user-7's subscription, shown by the app."""
    set_up_ios(db, workspace["app_id"])
    assert receipt(client, workspace, pki.transaction()).status_code == 200
    return workspace


def test_subscribed_then_refund_makes_the_user_inactive_at_once(
    client: FlaskClient, db: Database, workspace: dict[str, Any], pki: ApplePki
) -> None:
    set_up_ios(db, workspace["app_id"])
    token_free = transaction(transactionId="3000000000000001", originalTransactionId="3000000000000001")
    # Apple tells FloKit before the app does: the purchase is recorded, nobody's yet.
    answer = notify(client, pki.notification("SUBSCRIBED", "INITIAL_BUY", txn=token_free, renewal_info=renewal()))
    assert answer.status_code == 200 and answer.json["status"] == "applied", answer.json
    assert receipt(client, workspace, pki.sign(token_free)).json["active"] is True
    assert active(db, workspace, "user-7")
    refunded = token_free | {"revocationDate": now_ms(), "revocationReason": 1, "signedDate": now_ms() + 1}
    assert notify(client, pki.notification("REFUND", txn=refunded)).status_code == 200
    assert not active(db, workspace, "user-7")
    events = landed(db)
    assert set(events) == {"ios:3000000000000001:subscription_start", "ios:3000000000000001:refund"}
    assert events["ios:3000000000000001:refund"]["event_type"] == "refund"
    assert stored(db, workspace) == {"applied": 2}
    # Apple reverses the refund: the restated transaction carries no revocation any more.
    reversed_ = token_free | {"signedDate": now_ms() + 10}
    assert notify(client, pki.notification("REFUND_REVERSED", txn=reversed_)).status_code == 200
    assert active(db, workspace, "user-7")
    # A Family Sharing revocation revokes too.
    revoked = token_free | {"revocationDate": now_ms(), "revocationType": "FAMILY_REVOKE", "signedDate": now_ms() + 20}
    assert notify(client, pki.notification("REVOKE", txn=revoked)).status_code == 200
    assert not active(db, workspace, "user-7")


def test_did_renew_extends_and_expired_ends(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    now = now_ms()
    first_end = transaction()["expiresDate"]
    renewed = transaction(
        transactionId="2000000000000002",
        purchaseDate=first_end,
        expiresDate=first_end + 30 * DAY_MS,
        signedDate=now + 5,
    )
    assert notify(client, pki.notification("DID_RENEW", txn=renewed, renewal_info=renewal())).status_code == 200
    after_first_period = moment(first_end + DAY_MS)
    assert active(db, ios, "user-7", now=after_first_period)
    assert not active(db, ios, "user-7", now=moment(first_end + 31 * DAY_MS))
    assert landed(db)["ios:2000000000000002:renewal"]["user_id"] == "user-7"
    # Later the subscription lapses: EXPIRED restates the last period, ended.
    ended = renewed | {"expiresDate": now - HOUR_MS, "signedDate": now + 10}
    expired = pki.notification("EXPIRED", "VOLUNTARY", txn=ended, renewal_info=renewal(autoRenewStatus=0))
    assert notify(client, expired).status_code == 200
    assert not active(db, ios, "user-7")
    # A notification delivered late (Apple retries for days) states an older moment: no effect.
    late = pki.notification("DID_RENEW", txn=renewed, renewal_info=renewal(signedDate=now))
    assert notify(client, late).json["purchases_changed"] == 0
    assert not active(db, ios, "user-7")


def test_a_grace_period_keeps_access_until_its_end(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    now = now_ms()
    lapsed = transaction(expiresDate=now - HOUR_MS, signedDate=now + 5)
    grace_end = now + 6 * DAY_MS
    in_grace = renewal(gracePeriodExpiresDate=grace_end, isInBillingRetryPeriod=True, signedDate=now + 5)
    failed = pki.notification("DID_FAIL_TO_RENEW", "GRACE_PERIOD", txn=lapsed, renewal_info=in_grace)
    assert notify(client, failed).status_code == 200
    assert active(db, ios, "user-7")
    assert active(db, ios, "user-7", now=moment(grace_end - HOUR_MS))
    assert not active(db, ios, "user-7", now=moment(grace_end + 1))
    # Apple ends the grace period early: GRACE_PERIOD_EXPIRED restates it with its end passed.
    ended = renewal(gracePeriodExpiresDate=now_ms() - 1000, isInBillingRetryPeriod=True, signedDate=now + 7)
    expired = pki.notification("GRACE_PERIOD_EXPIRED", txn=lapsed | {"signedDate": now + 7}, renewal_info=ended)
    assert notify(client, expired).status_code == 200
    assert not active(db, ios, "user-7")
    assert notify(client, failed).json["status"] == "duplicate"  # Apple's late retry changes nothing
    # Without the grace period subtype (billing retry only), access ends with the period.
    no_grace = renewal(isInBillingRetryPeriod=True, signedDate=now + 10)
    retry = pki.notification("DID_FAIL_TO_RENEW", txn=lapsed | {"signedDate": now + 10}, renewal_info=no_grace)
    assert notify(client, retry).status_code == 200
    assert not active(db, ios, "user-7")


def test_auto_renew_turned_off_is_a_cancellation_with_access_to_the_period_end(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    off = pki.notification(
        "DID_CHANGE_RENEWAL_STATUS",
        "AUTO_RENEW_DISABLED",
        txn=transaction(signedDate=now_ms() + 5),
        renewal_info=renewal(autoRenewStatus=0, signedDate=now_ms() + 5),
    )
    assert notify(client, off).status_code == 200
    assert active(db, ios, "user-7")
    cancellation = landed(db)["ios:2000000000000001:cancellation"]
    assert cancellation["event_type"] == "cancellation" and cancellation["user_id"] == "user-7"


def test_a_duplicate_notification_is_applied_once(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    renewed = transaction(transactionId="2000000000000002", expiresDate=now_ms() + 60 * DAY_MS, signedDate=now_ms() + 5)
    signed = pki.notification(
        "DID_RENEW", txn=renewed, renewal_info=renewal(), notification_uuid="7f1c1d2e-0000-4000-8000-000000000001"
    )
    first, second = notify(client, signed), notify(client, signed)
    assert first.json["status"] == "applied" and second.json == {
        "status": "duplicate",
        "notification_id": first.json["notification_id"],
    }
    assert stored(db, ios) == {"applied": 1}
    assert sorted(landed(db)) == ["ios:2000000000000001:subscription_start", "ios:2000000000000002:renewal"]
    # The same notification re-signed (Apple's retry carries the same UUID): still once.
    again = pki.notification(
        "DID_RENEW", txn=renewed, renewal_info=renewal(), notification_uuid="7f1c1d2e-0000-4000-8000-000000000001"
    )
    assert notify(client, again).json["status"] == "duplicate"
    assert stored(db, ios) == {"applied": 1}


def test_test_notifications_answer_200_and_are_not_stored(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    answer = notify(client, pki.notification("TEST"))
    assert answer.status_code == 200 and answer.json["status"] == "ignored"
    assert stored(db, ios) == {}
    consumption = notify(client, pki.notification("CONSUMPTION_REQUEST", txn=transaction()))
    assert consumption.status_code == 200 and consumption.json["purchases_changed"] == 0


def test_unverifiable_notifications_are_401_and_nothing_is_stored(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki, tmp_path: Path
) -> None:
    refund = transaction(revocationDate=now_ms(), signedDate=now_ms() + 5)
    genuine = pki.notification("REFUND", txn=refund)
    header, payload, signature = genuine.split(".")
    rogue = ApplePki(tmp_path / "rogue", name="rogue")
    for bad in (
        f"{header}.{payload}.{signature[:-4]}{'AAAA' if not signature.endswith('AAAA') else 'BBBB'}",
        rogue.notification("REFUND", txn=refund),
        pki.notification("REFUND", txn=refund, bundle_id="com.unknown"),
        pki.notification("REFUND", txn=refund, environment="Sandbox"),
        pki.notification("REFUND", txn=refund, app_apple_id=999),
        # A genuine envelope around a transaction signed by someone else.
        _with_rogue_transaction(pki, rogue, refund),
    ):
        answer = notify(client, bad)
        assert answer.status_code == 401, answer.json
    assert client.post("/webhooks/ios_store", data=b"not json").status_code == 400
    assert client.post("/webhooks/ios_store", json={"other": 1}).status_code == 400
    assert stored(db, ios) == {}
    assert active(db, ios, "user-7")


def _with_rogue_transaction(pki: ApplePki, rogue: ApplePki, txn: dict[str, Any]) -> str:
    claims = {
        "notificationType": "REFUND",
        "notificationUUID": str(uuid.uuid4()),
        "version": "2.0",
        "signedDate": now_ms(),
        "data": {"bundleId": "com.acme.fit", "environment": "Production", "appAppleId": 1234567890,
                 "signedTransactionInfo": rogue.sign(txn)},
    }  # fmt: skip
    return pki.sign(claims)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/notifications.py")
def test_replay_applies_stored_notifications_again_without_online_checks(
    settings: Settings, client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    renewed = transaction(transactionId="2000000000000002", expiresDate=now_ms() + 60 * DAY_MS, signedDate=now_ms() + 5)
    assert notify(client, pki.notification("DID_RENEW", txn=renewed, renewal_info=renewal())).status_code == 200
    # Online checks on, and the test chain names no OCSP responder: verification would fail;
    # replay decodes without them.
    ctx = Context(settings=replace(settings, apple_online_checks=True), database=db)
    result = replay(ctx, provider="ios_store", since=utcnow() - timedelta(hours=1))
    assert (result.applied, result.failed) == (1, 0), result.errors
    assert stored(db, ios) == {"applied": 1}
    assert sorted(landed(db)) == ["ios:2000000000000001:subscription_start", "ios:2000000000000002:renewal"]
