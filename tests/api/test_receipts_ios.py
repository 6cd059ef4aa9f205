"""App Store receipts (`POST /api/paywall/receipt`, provider ios_store), verified in-house with
Apple's library against this test's own root -> intermediate -> leaf chain."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from api.app import create_app
from api.receipts.ios_store import NOT_VOUCHED
from tests.providers.apple_pki import DAY_MS, ApplePki, now_ms, renewal, transaction
from tests.support import free_port
from tests.support.ios import active, landed, notify, pki_settings_fields, receipt, set_up_ios
from transforms.entitlements.identity import apple_account_token
from transforms.timefmt import iso_z
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.settings import Settings


@pytest.fixture
def pki(tmp_path: Path) -> ApplePki:
    return ApplePki(tmp_path / "apple")


@pytest.fixture
def settings(settings: Settings, pki: ApplePki) -> Settings:
    return replace(settings, **pki_settings_fields(pki))


@pytest.fixture
def ios(db: Database, workspace: dict[str, Any]) -> dict[str, Any]:
    set_up_ios(db, workspace["app_id"])
    return workspace


def test_a_valid_transaction_makes_the_user_active(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    fields = transaction()
    response = receipt(client, ios, pki.sign(fields))
    assert response.status_code == 200, response.json
    assert response.json == {
        "active": True,
        "provider": "ios_store",
        "product_id": "pro_monthly",
        "expires_at": iso_z(datetime.fromtimestamp(fields["expiresDate"] / 1000, tz=UTC)),
        "environment": "production",
        "original_transaction_id": "2000000000000001",
        "in_trial": False,
    }
    assert response.headers["Cache-Control"] == "private, no-store"
    assert active(db, ios, "user-7") and not active(db, ios, "user-8")
    entitlement = client.get("/api/paywall/entitlement", headers={"x-user-id": "user-7", "x-app-key": ios["app_key"]})
    assert entitlement.json == {"active": True, "source": "iap"}
    event = landed(db)["ios:2000000000000001:subscription_start"]
    assert (
        event["user_id"] == "user-7" and event["source"] == "ios_store" and event["workspace_id"] == ios["workspace_id"]
    )
    assert json.loads(event["properties"])["revenue"] == 9.99


def test_a_lapsed_transaction_is_a_verified_inactive_purchase_a_later_notification_finds(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    now = now_ms()
    lapsed = transaction(purchaseDate=now - 40 * DAY_MS, expiresDate=now - 10 * DAY_MS, signedDate=now - 10 * DAY_MS)
    response = receipt(client, ios, pki.sign(lapsed))
    assert response.status_code == 200 and response.json["active"] is False
    assert not active(db, ios, "user-7")
    # The user renews later; Apple's DID_RENEW names only the purchase, the ledger knows whose it is.
    renewed = transaction(transactionId="2000000000000002", purchaseDate=now, expiresDate=now + 30 * DAY_MS)
    assert notify(client, pki.notification("DID_RENEW", txn=renewed, renewal_info=renewal())).status_code == 200
    assert active(db, ios, "user-7")
    assert landed(db)["ios:2000000000000002:renewal"]["user_id"] == "user-7"


def test_a_refunded_transaction_is_inactive(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    refunded = pki.transaction(revocationDate=now_ms() - 60_000, revocationReason=0, revocationType="REFUND_FULL")
    response = receipt(client, ios, refunded)
    assert response.status_code == 200 and response.json["active"] is False
    assert not active(db, ios, "user-7")
    assert json.loads(landed(db)["ios:2000000000000001:refund"]["properties"])["revenue"] == -9.99


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def test_what_apple_did_not_sign_for_this_app_is_422_with_one_text_and_the_reason_logged(
    client: FlaskClient,
    db: Database,
    ios: dict[str, Any],
    pki: ApplePki,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    genuine = pki.transaction()
    header, _, signature = genuine.split(".")
    tampered_payload = ".".join((header, _b64(transaction(expiresDate=now_ms() + 3650 * DAY_MS)), signature))
    flipped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    cases = {
        "tampered payload": (tampered_payload, "signature"),
        "tampered signature": (f"{header}.{genuine.split('.')[1]}.{flipped}", "signature"),
        "other bundle id": (pki.transaction(bundleId="com.other.app"), "no tenant provisioned"),
        "other environment": (pki.transaction(environment="Sandbox"), "environment"),
        "unknown root": (ApplePki(tmp_path / "rogue", name="rogue").transaction(), "certificate chain"),
        "no x5c": (".".join((_b64({"alg": "ES256"}), genuine.split(".")[1], signature)), "signature"),
    }
    for name, (jws, message) in cases.items():
        caplog.clear()
        response = receipt(client, ios, jws)
        assert response.status_code == 422, name
        assert response.json == {"error": NOT_VOUCHED}, (name, response.json)
        assert any(message in getattr(r, "reason", "") for r in caplog.records), (name, caplog.records)
    assert not active(db, ios, "user-7")
    assert landed(db) == {}
    assert receipt(client, ios, genuine).status_code == 200  # the genuine one still verifies


def test_no_roots_or_no_ios_app_is_422(
    settings: Settings, db: Database, workspace: dict[str, Any], pki: ApplePki, caplog: pytest.LogCaptureFixture
) -> None:
    client = create_app(settings).test_client()
    response = receipt(client, workspace, pki.transaction())
    assert response.status_code == 422 and response.json == {"error": NOT_VOUCHED}
    assert any("no tenant provisioned" in getattr(r, "reason", "") for r in caplog.records)
    set_up_ios(db, workspace["app_id"])
    no_roots = create_app(replace(settings, apple_root_certs=())).test_client()
    response = receipt(no_roots, workspace, pki.transaction())
    assert response.status_code == 422 and response.json == {"error": NOT_VOUCHED}
    assert any("FLOKIT_APPLE_ROOT_CERTS" in getattr(r, "reason", "") for r in caplog.records)


def test_an_unknown_bundle_id_and_a_bad_signature_get_the_same_bytes(
    client: FlaskClient, ios: dict[str, Any], pki: ApplePki
) -> None:
    """Nobody without a genuine transaction learns which bundle ids are set up here."""
    genuine = pki.transaction()
    header, payload, signature = genuine.split(".")
    forged = ".".join((header, payload, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")))
    unknown = receipt(client, ios, pki.transaction(bundleId="com.nobody.here"))
    bad = receipt(client, ios, forged)
    assert (unknown.status_code, bad.status_code) == (422, 422)
    assert unknown.get_data() == bad.get_data()


def test_a_purchase_linked_to_a_user_is_nobody_elses(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    good = pki.transaction()
    assert receipt(client, ios, good, user="payer").json["active"] is True
    # An inactive verdict for the same purchase, under another user's id: refused, the payer keeps access.
    lapsed = pki.transaction(expiresDate=now_ms() - DAY_MS, signedDate=now_ms() + 1000)
    response = receipt(client, ios, lapsed, user="attacker")
    assert response.status_code == 422 and "another user" in response.json["error"]
    assert active(db, ios, "payer") and not active(db, ios, "attacker")
    # One good receipt posted under many user ids: only its buyer is active.
    for i in range(5):
        assert receipt(client, ios, good, user=f"freeloader-{i}").status_code == 422
        assert not active(db, ios, f"freeloader-{i}")
    assert active(db, ios, "payer")
    assert landed(db)["ios:2000000000000001:subscription_start"]["user_id"] == "payer"


def test_the_app_account_token_must_name_the_user(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    signed = pki.transaction(appAccountToken=apple_account_token("alice"))
    response = receipt(client, ios, signed, user="mallory")
    assert response.status_code == 422 and "account token" in response.json["error"]
    assert not active(db, ios, "mallory") and not active(db, ios, "alice")
    assert receipt(client, ios, signed, user="alice").status_code == 200
    assert active(db, ios, "alice")


def test_client_sent_tenant_and_user_fields_are_ignored(
    client: FlaskClient, db: Database, ios: dict[str, Any], pki: ApplePki
) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    response = receipt(
        client,
        ios,
        pki.transaction(),
        user="user-7",
        app_id=other["app_id"],
        user_id="someone-else",
        workspace_id=other["workspace_id"],
    )
    assert response.status_code == 200
    assert active(db, ios, "user-7") and not active(db, ios, "someone-else")
    assert not active(db, other, "user-7") and not active(db, other, "someone-else")
    # A key of another app than the bundle id's is refused.
    wrong_key = client.post(
        "/api/paywall/receipt",
        json={"provider": "ios_store", "signedTransactionInfo": pki.transaction()},
        headers={"x-user-id": "user-7", "x-app-key": other["app_key"]},
    )
    assert wrong_key.status_code == 422


def test_online_checks_with_no_reachable_ocsp_responder_answer_502(
    settings: Settings, db: Database, ios: dict[str, Any], tmp_path: Path
) -> None:
    """The library asks the OCSP responder the certificates name; nothing listens there."""
    pki = ApplePki(tmp_path / "ocsp", ocsp_url=f"http://127.0.0.1:{free_port()}/ocsp")
    online = create_app(replace(settings, apple_root_certs=(pki.root_path,), apple_online_checks=True)).test_client()
    response = receipt(online, ios, pki.transaction())
    assert response.status_code == 502 and "OCSP" in response.json["error"]
    assert not active(db, ios, "user-7")
    offline = create_app(replace(settings, apple_root_certs=(pki.root_path,), apple_online_checks=False)).test_client()
    assert receipt(offline, ios, pki.transaction()).status_code == 200
