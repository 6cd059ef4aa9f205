"""What a stored notification keeps, and what an unauthenticated caller learns (issue 30).

Signed notifications of every provider that authenticates with a credential of its own (RevenueCat's
and Adapty's `Authorization`, Pub/Sub's OIDC token, the Android push `?token=`) go through the app;
then the database's files (SQLite) or rows (PostgreSQL) are searched for those credentials, as an
attacker holding a backup would: none is there, and replay still applies every notification. A
refusal says the same bytes whether the integration exists or not, and whatever failed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from api.notifications.framework import NOT_VERIFIED, Context, replay
from tests.providers.google_play_fake import (
    INSTANCE_KEY,
    PUSH_AUDIENCE,
    FakeGooglePlay,
    developer_notification,
    provision,
    push_body,
    settings_for,
    subscription,
)
from tests.support.notifications import adapty_event, rc_event
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.entitlements.tables import store_notifications
from warehouse.integrations import repository as repo
from warehouse.settings import Settings

RC_PATH = "/api/providers/subscription_provider_a/webhook"
ADAPTY_PATH = "/api/providers/subscription_provider_b/webhook"
ANDROID_PATH = "/webhooks/android_store"
# The providers' credentials as their dashboards would hold them (random, as the connect rule asks).
RC_SECRET = "rcwhk-8d41f0c27e9b5a36d14c8e0f7a2b9d53"
ADAPTY_SECRET = "adpt-3b9e07c1d5f28a64e0b7c31d9f5a2e86"
NOW = datetime.now(UTC)
PURCHASED = 4  # RTDN SUBSCRIPTION_PURCHASED


@pytest.fixture
def play() -> Iterator[FakeGooglePlay]:
    with FakeGooglePlay() as fake:
        yield fake


@pytest.fixture
def gateway_settings(settings: Settings, play: FakeGooglePlay) -> Settings:
    return settings_for(settings, play)


def connect(db: Database, workspace: dict[str, Any], integration_type: str, raw: dict[str, Any]) -> str:
    """As `flokit admin integrations connect` does, sealed under the instance key the gateway has."""
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace["workspace_id"],
            integration_type=integration_type,
            config=validate_config(integration_type, raw),
            instance_key=INSTANCE_KEY,
            actor="ops@example.com",
        ).id


def revenuecat(db: Database, workspace: dict[str, Any]) -> str:
    raw = {"api_key": "sk_rc_0123456789abcdef", "project_id": "proj1a2b3c4d"}
    return connect(db, workspace, "subscription_provider_a", raw | {
        "webhook_authorization": f"Bearer {RC_SECRET}", "app_id": workspace["app_id"]})  # fmt: skip


def adapty(db: Database, workspace: dict[str, Any]) -> str:
    raw = {"bucket": "adapty-exports", "access_key_id": "AKIA0123456789", "secret_access_key": "s" * 40}
    return connect(db, workspace, "subscription_provider_b", raw | {
        "webhook_authorization": ADAPTY_SECRET, "app_id": workspace["app_id"]})  # fmt: skip


def post_json(client: FlaskClient, url: str, body: Any, **headers: str) -> Any:
    return client.post(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers})


def rc_body(user: str, original: str) -> dict[str, Any]:
    return {"api_version": "1.0", "event": rc_event("INITIAL_PURCHASE", user=user, original=original)}


def android_push(client: FlaskClient, play: FakeGooglePlay, token: str, message_id: str, *, query: str = "",
                 bearer: str | None = None) -> Any:  # fmt: skip
    note = {"subscriptionNotification": {"version": "1.0", "notificationType": PURCHASED, "purchaseToken": token}}
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {bearer}"} if bearer else {})
    return client.post(ANDROID_PATH + query, data=push_body(developer_notification(play.package, **note), message_id),
                       headers=headers)  # fmt: skip


def database_text(db: Database, settings: Settings) -> bytes:
    """Everything the database holds, as someone with its files or a backup reads it: the SQLite
    file and its WAL byte for byte; on PostgreSQL, every row of the notifications table as text."""
    if db.is_sqlite:
        path = Path(sa.make_url(settings.database_url).database or "")
        files = [p for p in path.parent.iterdir() if p.name.startswith(path.name)]
        assert path in files
        return b"".join(p.read_bytes() for p in files)
    with db.read() as conn:
        rows = conn.exec_driver_sql("SELECT CAST(n AS text) FROM store_notifications AS n").scalars().all()
    assert rows
    return "\n".join(rows).encode()


def test_no_credential_is_stored_with_a_notification_and_replay_still_applies_them(
    gateway_settings: Settings, db: Database, workspace: dict[str, Any], play: FakeGooglePlay
) -> None:
    push_token = provision(db, workspace["app_id"], play)
    gateway = create_app(gateway_settings).test_client()
    rc_id, adapty_id = revenuecat(db, workspace), adapty(db, workspace)
    oidc = play.mint_id_token(PUSH_AUDIENCE)
    for token in ("tok-query", "tok-oidc"):
        play.subscriptions[token] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + timedelta(days=30),
                                                 acknowledged=True)  # fmt: skip

    answers = [
        post_json(gateway, f"{RC_PATH}?integration={rc_id}", rc_body("user-7", "1000000111"),
                  Authorization=f"Bearer {RC_SECRET}"),
        post_json(gateway, f"{ADAPTY_PATH}?integration={adapty_id}", adapty_event("subscription_started", NOW),
                  Authorization=ADAPTY_SECRET),
        android_push(gateway, play, "tok-query", "msg-query", query=f"?token={push_token}"),
        android_push(gateway, play, "tok-oidc", "msg-oidc", bearer=oidc),
    ]  # fmt: skip

    assert [(a.status_code, a.json["status"]) for a in answers] == [(200, "applied")] * 4, [a.json for a in answers]
    held = database_text(db, gateway_settings)
    for secret in (RC_SECRET, ADAPTY_SECRET, push_token, oidc, oidc.split(".")[2]):
        assert secret.encode() not in held, secret
    with db.read() as conn:
        kept = conn.execute(sa.select(store_notifications.c.headers, store_notifications.c.query_string)).all()
    assert [(dict(h), q) for h, q in kept] == [({}, "")] * 4

    ctx = Context(settings=gateway_settings, database=db)
    since = NOW - timedelta(hours=1)
    for provider, count in (("subscription_provider_a", 1), ("subscription_provider_b", 1), ("android_store", 2)):
        result = replay(ctx, provider=provider, since=since)
        assert (result.applied, result.failed, result.errors) == (count, 0, []), provider


def test_a_processor_deployed_alone_stores_the_same(
    gateway_settings: Settings, db: Database, workspace: dict[str, Any]
) -> None:
    """Alone (`FLOKIT_SURFACES=processor`) it sees every header the caller sent, not the gateway's
    allowlist; it keeps no more of them."""
    rc_id = revenuecat(db, workspace)
    processor = create_app(replace(gateway_settings, surfaces=("processor",))).test_client()
    gateway = create_app(gateway_settings).test_client()
    extra = {"Authorization": f"Bearer {RC_SECRET}", "Cookie": "session=abc", "X-Forwarded-For": "203.0.113.9",
             "User-Agent": "RevenueCat"}  # fmt: skip
    url = f"{RC_PATH}?integration={rc_id}&token=not-for-storage"
    alone = post_json(processor, url, rc_body("user-7", "1000000111"), **extra)
    beside = post_json(gateway, url, rc_body("user-8", "1000000222"), **extra)
    assert (alone.status_code, beside.status_code) == (200, 200), (alone.json, beside.json)
    with db.read() as conn:
        kept = conn.execute(sa.select(store_notifications.c.headers, store_notifications.c.query_string)).all()
    assert [(dict(h), q) for h, q in kept] == [({}, "")] * 2


def test_every_unauthenticated_refusal_is_the_same_bytes(
    gateway_settings: Settings, db: Database, workspace: dict[str, Any]
) -> None:
    """No caller learns whether an integration id exists, its type, or what was wrong."""
    rc_id = revenuecat(db, workspace)
    stripe_id = connect(db, workspace, "payment_processor", {
        "secret_key": "sk_test_0123456789abcdef", "webhook_secret": "whsec_0123456789abcdef",
        "app_id": workspace["app_id"]})  # fmt: skip
    gateway = create_app(gateway_settings).test_client()
    body = rc_body("user-7", "1000000111")
    refusals = {
        "unknown integration": post_json(gateway, f"{RC_PATH}?integration=int_unknown", body,
                                         Authorization=f"Bearer {RC_SECRET}"),
        "another type's integration": post_json(gateway, f"{RC_PATH}?integration={stripe_id}", body,
                                                Authorization=f"Bearer {RC_SECRET}"),
        "wrong secret": post_json(gateway, f"{RC_PATH}?integration={rc_id}", body, Authorization="Bearer guessed"),
        "no integration named": post_json(gateway, RC_PATH, body, Authorization=f"Bearer {RC_SECRET}"),
        "unknown generic app": post_json(gateway, "/api/providers/generic-subscription/webhook?app=app_nobody",
                                         body, **{"Service-Signature": "t=1,v1=00"}),
        "non-UTF-8 body for a Stripe integration": gateway.post(
            f"/webhooks/payment_processor?integration={stripe_id}", data=b"\xff\xfe",
            headers={"Stripe-Signature": "t=1,v1=00"}),
    }  # fmt: skip
    for name, answer in refusals.items():
        assert answer.status_code == 401, (name, answer.json)
        assert answer.get_data() == refusals["unknown integration"].get_data(), name
    assert refusals["wrong secret"].json == {"error": NOT_VERIFIED}
