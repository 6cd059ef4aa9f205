"""Receipts and entitlements: a real upstream verifier on 127.0.0.1 decides; the gateway records
its verdict per app and user and serves it; upstream failures map to 422, 502, 503 and 504."""

import base64
import json
import time
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import free_port
from tests.webhook_receiver import Received, running_receiver
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.tables import apps


def verdict(received: Received) -> tuple[int, bytes]:
    """The fake store verifier: purchase tokens say what happens."""
    sent = json.loads(received.body)
    token = sent.get("purchaseToken") or payload(sent["signedTransactionInfo"])["token"]
    if token == "no-tenant":
        return 400, json.dumps({"error": "no tenant provisioned"}).encode()
    if token == "broken":
        return 500, b"upstream exploded"
    if token == "slow":
        time.sleep(1.5)
    if token == "malformed":
        return 200, json.dumps({"active": "yes", "provider": sent["provider"]}).encode()
    active = token != "refunded"
    return 200, json.dumps(
        {"active": active, "provider": sent["provider"], "product_id": "pro_yearly", "trace": "x1"}
    ).encode()


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws(token: str) -> str:
    """A compact JWS shaped like the App Store's signedTransactionInfo (not signed: the fake
    verifier reads its payload)."""
    return ".".join((b64url(b'{"alg":"ES256"}'), b64url(json.dumps({"token": token}).encode()), b64url(b"sig")))


def payload(compact: str) -> Any:
    part = compact.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def gateway(settings: Settings, url: str | None, timeout: float = 10.0) -> FlaskClient:
    return create_app(replace(settings, receipt_verifier_url=url, passthrough_timeout_s=timeout)).test_client()


def android(token: str) -> dict[str, Any]:
    return {"provider": "android_store", "packageName": "com.acme.fit", "purchaseToken": token}


def headers(workspace: dict, user: str = "user-7", key: bool = True) -> dict[str, str]:
    return {"x-user-id": user} | ({"x-app-key": workspace["app_key"]} if key else {})


def entitlement(client: FlaskClient, workspace: dict, user: str = "user-7") -> Any:
    return client.get("/api/paywall/entitlement", headers=headers(workspace, user)).json


def test_a_verified_purchase_becomes_the_users_entitlement(settings: Settings, workspace: dict) -> None:
    with running_receiver() as upstream:
        upstream.respond = verdict
        client = gateway(settings, upstream.url + "/verify")
        assert entitlement(client, workspace) == {"active": False, "source": "none"}
        response = client.post("/api/paywall/receipt", json=android("good"), headers=headers(workspace))
        assert response.status_code == 200
        assert response.json == {"active": True, "provider": "android_store", "product_id": "pro_yearly", "trace": "x1"}
        sent = json.loads(upstream.requests[0].body)
        assert upstream.requests[0].path == "/verify"
        assert sent == android("good") | {"user_id": "user-7", "app_id": workspace["app_id"]}
        assert entitlement(client, workspace) == {"active": True, "source": "iap"}
        assert entitlement(client, workspace, user="user-8") == {"active": False, "source": "none"}
        current = client.get(
            "/api/entitlements/current", query_string={"userId": "user-7"}, headers={"x-app-key": workspace["app_key"]}
        )
        assert current.json == {"active": True, "source": "iap"}
        # The store's later verdict wins: a refund turns it off.
        ios = {"provider": "ios_store", "signedTransactionInfo": jws("refunded")}
        assert client.post("/api/paywall/receipt", json=ios, headers=headers(workspace)).json["active"] is False
        assert entitlement(client, workspace) == {"active": False, "source": "iap"}
        # An app-session token identifies the app as the key does.
        token_client = create_app(
            replace(settings, receipt_verifier_url=upstream.url + "/verify", app_session_secret="k" * 40)
        ).test_client()
        token = token_client.post("/api/paywall/token", headers=headers(workspace, user="user-9")).json["token"]
        by_token = token_client.post(
            "/api/paywall/receipt", json=android("good"), headers={"x-app-token": token, "x-user-id": "user-9"}
        )
        assert by_token.status_code == 200 and entitlement(client, workspace, user="user-9")["active"] is True
        # Without the (recommended) key the verdict is returned but not recorded: no app to record it for.
        assert (
            client.post("/api/paywall/receipt", json=android("good"), headers=headers(workspace, key=False)).status_code
            == 200
        )
        assert entitlement(client, workspace) == {"active": False, "source": "iap"}


def test_receipt_validation_and_identity(settings: Settings, workspace: dict) -> None:
    client = gateway(settings, "http://127.0.0.1:9/never-called")
    for body in ({"provider": "ios_store"}, {"provider": "android_store", "packageName": "x"}, {"provider": "web"}, {}):
        response = client.post("/api/paywall/receipt", json=body, headers=headers(workspace))
        assert response.status_code == 400 and set(response.json) == {"error"}, body
    assert client.post("/api/paywall/receipt", json=android("good"), headers={}).status_code == 401
    bad_key = client.post(
        "/api/paywall/receipt", json=android("good"), headers={"x-user-id": "u", "x-app-key": "pk_no"}
    )
    assert bad_key.status_code == 401


NOT_A_JWS = ("refunded", "a.b", "a.b.c.d", "a..c", "a.b.c=", "a.b+/.c", " a.b.c")


def test_a_receipt_that_is_not_a_jws_is_refused_before_any_upstream(settings: Settings, workspace: dict) -> None:
    """400 in the gateway shape, whether a verifier is configured (never called) or not (not 503)."""
    expected = {
        "error": "Invalid body field 'signedTransactionInfo': must be a JWS: three base64url parts separated by dots"
    }
    with running_receiver() as upstream:
        upstream.respond = verdict
        for url in (upstream.url + "/verify", None):
            client = gateway(settings, url)
            for bad in NOT_A_JWS:
                body = {"provider": "ios_store", "signedTransactionInfo": bad}
                response = client.post("/api/paywall/receipt", json=body, headers=headers(workspace))
                assert response.status_code == 400 and response.json == expected, (url, bad)
        assert upstream.requests == []
        # A JWS goes on to the verifier (or to the 503 when none is configured).
        good = {"provider": "ios_store", "signedTransactionInfo": jws("good")}
        assert (
            gateway(settings, upstream.url + "/verify")
            .post("/api/paywall/receipt", json=good, headers=headers(workspace))
            .json["active"]
            is True
        )
        assert (
            gateway(settings, None).post("/api/paywall/receipt", json=good, headers=headers(workspace)).status_code
            == 503
        )


def test_upstream_rejections_and_failures(settings: Settings, workspace: dict) -> None:
    assert (
        gateway(settings, None)
        .post("/api/paywall/receipt", json=android("good"), headers=headers(workspace))
        .status_code
        == 503
    )
    closed = gateway(settings, f"http://127.0.0.1:{free_port()}/verify")
    assert closed.post("/api/paywall/receipt", json=android("good"), headers=headers(workspace)).status_code == 502
    with running_receiver() as upstream:
        upstream.respond = verdict
        client = gateway(settings, upstream.url + "/verify", timeout=0.5)
        rejected = client.post("/api/paywall/receipt", json=android("no-tenant"), headers=headers(workspace))
        assert rejected.status_code == 422 and rejected.json == {"error": "no tenant provisioned"}
        broken = client.post("/api/paywall/receipt", json=android("broken"), headers=headers(workspace))
        assert broken.status_code == 502
        slow = client.post("/api/paywall/receipt", json=android("slow"), headers=headers(workspace))
        assert slow.status_code == 504
        assert entitlement(client, workspace) == {"active": False, "source": "none"}


def test_entitlement_reads_need_a_key_or_token_and_a_user(client: FlaskClient, db: Database, workspace: dict) -> None:
    assert client.get("/api/paywall/entitlement", headers={"x-user-id": "u"}).status_code == 401
    assert client.get("/api/paywall/entitlement", headers={"x-app-key": workspace["app_key"]}).status_code == 401
    assert client.get("/api/paywall/entitlement", headers={"x-app-key": "pk_no", "x-user-id": "u"}).status_code == 401
    assert client.get("/api/entitlements/current", headers={"x-app-key": workspace["app_key"]}).status_code == 401
    mine = {"x-app-key": workspace["app_key"], "x-user-id": "u"}
    assert client.get("/api/paywall/entitlement", headers=mine).status_code == 200
    with db.write() as conn:
        conn.execute(sa.update(apps).where(apps.c.id == workspace["app_id"]).values(revoked_at=sa.func.now()))
    assert client.get("/api/paywall/entitlement", headers=mine).status_code == 401  # a revoked key


def test_a_verdict_that_is_not_the_declared_shape_is_an_upstream_failure(settings: Settings, workspace: dict) -> None:
    """`active` must be a boolean (the declared Verification): anything else is 502, never coerced
    or recorded."""
    with running_receiver() as upstream:
        upstream.respond = verdict
        client = gateway(settings, upstream.url + "/verify")
        r = client.post("/api/paywall/receipt", json=android("malformed"), headers=headers(workspace))
        assert r.status_code == 502
        assert r.json == {"error": "Receipt verification upstream answered a malformed verdict"}
        assert entitlement(client, workspace) == {"active": False, "source": "none"}
