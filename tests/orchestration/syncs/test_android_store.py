"""The Google Play sync against the fake Play Developer API on 127.0.0.1 (tests/providers/
google_play_fake.py): Google's own client library, real OAuth with the app's service account,
`voidedpurchases.list` paging and Google's error shapes, a real database and lake. Purchases
come in the way users make them (receipts and notifications through the gateway); what users
notice is read back through `GET /api/paywall/entitlement`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from flask.testing import FlaskClient

from orchestration.syncs.connectors.android_store import CONNECTOR, PlayClient
from orchestration.syncs.execute import execute_sync
from tests.providers.google_play_fake import (
    INSTANCE_KEY,
    FakeGooglePlay,
    developer_notification,
    provision,
    push_body,
    subscription,
    voided,
)
from tests.providers.google_play_support import buy, entitled, gateway_for, grant
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database, utcnow
from warehouse.entitlements import ledger
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.events.tables import landed_events
from warehouse.integrations import repository as repo
from warehouse.integrations.tables import integrations
from warehouse.integrations.target import SyncTarget
from warehouse.lake import LocalLake
from warehouse.settings import Settings

TYPE = "android_store"
DAY = timedelta(days=1)
ACTIVE, EXPIRED = "SUBSCRIPTION_STATE_ACTIVE", "SUBSCRIPTION_STATE_EXPIRED"
ORDER_1, ORDER_2, ORDER_3 = "GPA.3301-1111-1111-11111", "GPA.3301-2222-2222-22222", "GPA.3301-3333-3333-33333"


@pytest.fixture
def play() -> Iterator[FakeGooglePlay]:
    with FakeGooglePlay() as fake:
        yield fake


@pytest.fixture
def push_token(db: Database, workspace: dict[str, Any], play: FakeGooglePlay) -> str:
    return provision(db, workspace["app_id"], play)


@pytest.fixture
def gateway(settings: Settings, play: FakeGooglePlay, push_token: str) -> FlaskClient:
    return gateway_for(settings, play)


def config(play: FakeGooglePlay, workspace: dict[str, Any]) -> ValidConfig:
    raw = {"app_id": workspace["app_id"], "base_url": play.api_url, "requests_per_minute": 60_000}
    return validate_config(TYPE, raw)


def sync(
    play: FakeGooglePlay,
    db: Database,
    workspace: dict[str, Any],
    tmp_path: Path,
    *,
    state: dict[str, Any] | None = None,
    instance_key: str | None = INSTANCE_KEY,
    backoff_s: float = 0.01,
) -> SyncTarget:
    cfg = config(play, workspace)
    client = CONNECTOR.client(cfg)
    assert isinstance(client, PlayClient)
    client.backoff_s = backoff_s
    target = SyncTarget(
        db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], "int_test", TYPE,
        state=dict(state or {}), instance_key=instance_key,
    )  # fmt: skip
    CONNECTOR.sync(client, target, cfg, lambda _line: None)
    return target


def events(db: Database) -> list[Any]:
    with db.read() as conn:
        return list(conn.execute(sa.select(landed_events).order_by(landed_events.c.seq)))


def grants(db: Database) -> list[tuple[Any, ...]]:
    """Every grant's state (what a sync that changes nothing leaves as it was)."""
    with db.read() as conn:
        rows = conn.execute(sa.text("SELECT * FROM entitlement_grants ORDER BY store_key")).all()
    return [tuple(r) for r in rows]


def millis(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def test_voided_purchases_over_two_pages_are_revoked_with_one_refund_each(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-1"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    play.subscriptions["tok-2"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_2)
    buy(gateway, play, workspace, "tok-1", "user-1")
    buy(gateway, play, workspace, "tok-2", "user-2")
    assert entitled(gateway, workspace, "user-1") and entitled(gateway, workspace, "user-2")
    play.voided = [
        voided("tok-1", ORDER_1, voided_at=now - 3 * DAY),
        voided("tok-2", ORDER_2, voided_at=now - 2 * DAY),
        voided("tok-unknown", ORDER_3, voided_at=now - DAY),  # a purchase FloKit never saw
    ]
    play.voided_page_cap = 2

    first = sync(play, db, workspace, tmp_path)

    assert not entitled(gateway, workspace, "user-1") and not entitled(gateway, workspace, "user-2")
    pages = play.calls.voided_lists
    assert len(pages) == 2 and "token" in pages[1]
    assert pages[0]["type"] == "1" and pages[0]["maxResults"] == "1000"
    assert millis(now - 30 * DAY) <= int(pages[0]["startTime"]) <= millis(now - 29 * DAY)
    refunds = {e.event_id: e for e in events(db) if e.event_type == "refund"}
    assert set(refunds) == {f"gp:{o}:refund" for o in (ORDER_1, ORDER_2, ORDER_3)}
    assert refunds[f"gp:{ORDER_1}:refund"].user_id == "user-1" and refunds[f"gp:{ORDER_2}:refund"].user_id == "user-2"
    assert first.records == 3
    # A later receipt of the unknown purchase cannot grant: it is on record as voided.
    assert grant(db, workspace, "tok-unknown").revoked_at is not None

    before, landed = grants(db), len(events(db))
    second = sync(play, db, workspace, tmp_path, state=first.state)

    assert second.records == 0 and len(events(db)) == landed and grants(db) == before
    # The second sync asks from the first one's start (a day of overlap), not 30 days back.
    started = datetime.fromisoformat(first.state["google_play"]["voided_since"])
    assert int(play.calls.voided_lists[2]["startTime"]) == millis(started - DAY)


def test_a_voided_purchase_notified_then_synced_lands_once(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path, push_token: str
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-1"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-1", "user-1")
    play.voided = [voided("tok-1", ORDER_1, voided_at=now)]  # the notification is confirmed by the list
    void = {"voidedPurchaseNotification": {"purchaseToken": "tok-1", "orderId": ORDER_1, "productType": 1,
                                           "refundType": 1}}  # fmt: skip
    body = push_body(developer_notification(play.package, **void), "msg-void")
    answer = gateway.post(f"/webhooks/android_store?token={push_token}", data=body,
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 200, answer.json
    assert not entitled(gateway, workspace, "user-1")

    target = sync(play, db, workspace, tmp_path)

    assert target.records == 0
    assert [e.event_id for e in events(db) if e.event_type == "refund"] == [f"gp:{ORDER_1}:refund"]
    assert not entitled(gateway, workspace, "user-1")


def test_a_renewal_the_notifications_missed_grants_again_after_the_sync(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    # Shown at the period's end, before Google charged the renewal; no RENEWED notification came.
    play.subscriptions["tok-r"] = subscription(ACTIVE, expires=now - timedelta(hours=1), order=ORDER_1)
    play.subscriptions["tok-far"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_2)
    buy(gateway, play, workspace, "tok-r", "user-1")
    buy(gateway, play, workspace, "tok-far", "user-2")
    assert not entitled(gateway, workspace, "user-1")
    play.subscriptions["tok-r"] = subscription(ACTIVE, expires=now + 30 * DAY, order=ORDER_1 + "..0", acknowledged=True)
    play.calls.gets.clear()

    target = sync(play, db, workspace, tmp_path)

    assert entitled(gateway, workspace, "user-1")
    assert play.calls.gets == ["subscriptionsv2:tok-r"]  # a purchase ending in 20 days is not re-read
    renewal = {e.event_id: e for e in events(db)}[f"gp:{ORDER_1}..0:renewal"]
    assert renewal.user_id == "user-1" and renewal.properties["revenue"] == 9.99
    assert target.records == 1


def test_an_expiry_the_notifications_missed_ends_access_after_the_sync(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-e"] = subscription(ACTIVE, expires=now + 2 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-e", "user-1")
    assert entitled(gateway, workspace, "user-1")
    # Revoked by Google without a notification reaching FloKit (e.g. the endpoint was down for days).
    play.subscriptions["tok-e"] = subscription(EXPIRED, expires=now + 2 * DAY, order=ORDER_1, auto_renew=False)

    sync(play, db, workspace, tmp_path)

    assert not entitled(gateway, workspace, "user-1")


PURCHASED = 4  # RTDN SubscriptionNotification.notificationType: a new purchase (an upgrade too)
REPLACED = {"replacementCancellation": {}}  # canceledStateContext of a token a newer one replaced


def notify(gateway: FlaskClient, play: FakeGooglePlay, push_token: str, token: str, message_id: str) -> None:
    """A SUBSCRIPTION_PURCHASED notification of `token`, pushed as Pub/Sub does."""
    note = {"subscriptionNotification": {"version": "1.0", "notificationType": PURCHASED, "purchaseToken": token}}
    body = push_body(developer_notification(play.package, **note), message_id)
    answer = gateway.post(f"/webhooks/android_store?token={push_token}", data=body,
                          headers={"Content-Type": "application/json"})  # fmt: skip
    assert answer.status_code == 200 and answer.json["status"] == "applied", answer.json


def upgrade(play: FakeGooglePlay, old: str, new: str, *, expires: datetime, order: str) -> None:
    """Google's side of an upgrade: a new token linking to the old one, which is then replaced."""
    play.subscriptions[new] = subscription(ACTIVE, expires=expires, product="pro_yearly", order=order, linked=old)
    before = play.subscriptions[old]
    play.subscriptions[old] = subscription(
        EXPIRED, expires=datetime.now(UTC) - DAY, order=before["latestOrderId"], canceled=REPLACED, acknowledged=True
    )


def test_a_renewal_of_an_upgraded_subscription_is_read_from_its_newest_token(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path, push_token: str
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-a"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-a", "user-1")
    # Upgraded in the app; only the notification of the new token reaches FloKit.
    upgrade(play, "tok-a", "tok-b", expires=now + DAY, order=ORDER_2)
    notify(gateway, play, push_token, "tok-b", "msg-upgrade")
    # Google renews the new token; its RENEWED notification never arrives.
    renewed_until = now + 365 * DAY
    play.subscriptions["tok-b"] = subscription(
        ACTIVE, expires=renewed_until, product="pro_yearly", order=ORDER_2 + "..0", linked="tok-a", acknowledged=True
    )
    play.calls.gets.clear()

    target = sync(play, db, workspace, tmp_path)

    assert play.calls.gets == ["subscriptionsv2:tok-b"]  # not the first token, which Google calls replaced
    assert target.state["google_play"]["reread"] == 1
    upgraded = grant(db, workspace, "tok-a")
    assert upgraded.product_id == "pro_yearly" and upgraded.current_token == "tok-b"
    assert abs(upgraded.expires_at - renewed_until) < timedelta(milliseconds=1)
    with db.read() as conn:
        two_days_on = ledger.current(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"],
                                     user_id="user-1", now=now + 2 * DAY)  # fmt: skip
    assert two_days_on.active  # would have lapsed without the renewal
    renewal = {e.event_id: e for e in events(db)}[f"gp:{ORDER_2}..0:renewal"]
    assert renewal.user_id == "user-1"


def test_an_expiry_of_an_upgraded_subscription_is_read_from_its_newest_token(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-a"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-a", "user-1")
    # Upgraded; this time the app verifies the new token (its receipt continues the purchase).
    upgrade(play, "tok-a", "tok-b", expires=now + 2 * DAY, order=ORDER_2)
    assert buy(gateway, play, workspace, "tok-b", "user-1")["original_transaction_id"] == "tok-a"
    assert entitled(gateway, workspace, "user-1")
    # Revoked by Google without a notification reaching FloKit.
    play.subscriptions["tok-b"] = subscription(
        EXPIRED, expires=now + 2 * DAY, product="pro_yearly", order=ORDER_2, linked="tok-a", auto_renew=False
    )

    sync(play, db, workspace, tmp_path)

    assert not entitled(gateway, workspace, "user-1")
    assert grant(db, workspace, "tok-a").current_token == "tok-b"


def test_a_successor_the_ledger_never_heard_of_counts_as_replaced_and_changes_nothing(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-a"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-a", "user-1")
    upgrade(play, "tok-a", "tok-b", expires=now + 2 * DAY, order=ORDER_2)
    buy(gateway, play, workspace, "tok-b", "user-1")
    # Changed plan again; neither receipt nor notification of tok-c came. Google links only
    # backwards (tok-c -> tok-b), so nothing leads from the ledger to tok-c.
    upgrade(play, "tok-b", "tok-c", expires=now + 30 * DAY, order=ORDER_3)
    before = grants(db)
    play.calls.gets.clear()

    target = sync(play, db, workspace, tmp_path)

    assert play.calls.gets == ["subscriptionsv2:tok-b"]
    assert target.state["google_play"]["reread"] == 0 and grants(db) == before
    assert entitled(gateway, workspace, "user-1")  # what tok-b last stated, until its notifications come


def test_a_void_of_a_successor_the_ledger_never_heard_of_revokes_the_purchase_and_makes_it_current(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-a"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-a", "user-1")
    upgrade(play, "tok-a", "tok-b", expires=now + 365 * DAY, order=ORDER_2)
    # The upgrade was refunded; Google lists the void of tok-b, which FloKit never heard of.
    play.subscriptions["tok-b"] = subscription(
        EXPIRED, expires=now, product="pro_yearly", order=ORDER_2, linked="tok-a", auto_renew=False
    )
    play.voided = [voided("tok-b", ORDER_2, voided_at=now)]

    sync(play, db, workspace, tmp_path)

    revoked = grant(db, workspace, "tok-a")
    assert revoked.revoked_at is not None and revoked.current_token == "tok-b"
    assert not entitled(gateway, workspace, "user-1")
    assert f"gp:{ORDER_2}:refund" in {e.event_id for e in events(db)}


@pytest.mark.parametrize("status", [401, 403])
def test_google_refusing_the_service_account_fails_as_auth_in_its_words(
    play: FakeGooglePlay, push_token: str, db: Database, workspace: dict[str, Any], tmp_path: Path, status: int
) -> None:
    play.api_status = status
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "auth" and failed.value.refused
    words = "invalid authentication credentials" if status == 401 else "insufficient permissions"
    assert words in failed.value.message and f"answered {status}" in failed.value.message


def test_a_revoked_service_account_key_fails_as_auth(
    play: FakeGooglePlay, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    # A key of the account that was deleted in Google Cloud: the token endpoint refuses its grant.
    provision(db, workspace["app_id"], play, account=play.service_account_info(private_key=pem))
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "auth" and "invalid_grant" in failed.value.message
    assert play.calls.token_refused >= 1


def test_a_429_is_waited_out_as_google_asks_then_the_sync_succeeds(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-1"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-1", "user-1")
    play.voided = [voided("tok-1", ORDER_1, voided_at=now - DAY)]
    play.fail_next = [(429, {"Retry-After": "1"})]

    started = time.monotonic()
    target = sync(play, db, workspace, tmp_path, backoff_s=10.0)  # a backoff would take 10 s: Retry-After is used

    assert 1.0 <= time.monotonic() - started < 8.0
    assert target.state["google_play"]["rate_limited"] == 1 and target.records == 1
    assert not entitled(gateway, workspace, "user-1")


def test_429_on_every_call_fails_as_rate_limited_and_changes_nothing(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    play.voided = [voided("tok-1", ORDER_1, voided_at=datetime.now(UTC) - DAY)]
    play.api_status = 429
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "rate_limited" and not failed.value.refused
    assert "Quota exceeded" in failed.value.message and events(db) == []


def test_5xx_is_retried_then_the_sync_succeeds(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-1"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-1", "user-1")
    play.voided = [voided("tok-1", ORDER_1, voided_at=now - DAY)]
    play.fail_next = [(503, {}), (500, {})]

    target = sync(play, db, workspace, tmp_path)

    assert target.records == 1 and not entitled(gateway, workspace, "user-1")
    assert target.state["google_play"]["requests"] == 3  # two failed tries of the list, then the list


def test_5xx_on_every_call_fails_as_provider_error(
    play: FakeGooglePlay, push_token: str, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    play.api_status = 503
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "provider_error" and "currently unavailable" in failed.value.message


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/stores.py")
def test_an_app_without_android_credentials_fails_as_config(
    play: FakeGooglePlay, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "config" and "flokit admin apps stores" in failed.value.message
    with db.write() as conn:  # a package but no service account
        set_stores(
            conn,
            app_id=workspace["app_id"],
            update=StoresUpdate(android_package=play.package),
            instance_key=INSTANCE_KEY,
        )
    with pytest.raises(ClientError) as failed:
        sync(play, db, workspace, tmp_path)
    assert failed.value.code == "config"
    assert play.calls.tokens_issued == 0 and play.calls.voided_lists == []


def test_check_makes_one_authenticated_call(
    play: FakeGooglePlay, push_token: str, settings: Settings, workspace: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("FLOKIT_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("FLOKIT_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("FLOKIT_SECRET_KEY", INSTANCE_KEY)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    play.voided = [voided("tok-1", ORDER_1, voided_at=utcnow() - DAY)]

    summary = CONNECTOR.check(CONNECTOR.client(config(play, workspace)))

    assert summary.startswith(f"Google Play app {play.package}:") and summary.endswith("in the last 30 days")
    assert [q["maxResults"] for q in play.calls.voided_lists] == ["1"]
    play.api_status = 403
    with pytest.raises(ClientError) as failed:
        CONNECTOR.check(CONNECTOR.client(config(play, workspace)))
    assert failed.value.code == "auth"


def test_a_queued_sync_runs_with_the_instance_key_and_records_what_it_wrote(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, tmp_path: Path
) -> None:
    """Through `execute_sync`, as the Dagster run does: the app's sealed key is unsealed with the
    run's instance key, and the cursor is kept only once the sync succeeded."""
    now = datetime.now(UTC)
    play.subscriptions["tok-1"] = subscription(ACTIVE, expires=now + 20 * DAY, order=ORDER_1)
    buy(gateway, play, workspace, "tok-1", "user-1")
    play.voided = [voided("tok-1", ORDER_1, voided_at=now - DAY)]
    with db.write() as conn:
        integration = repo.connect(
            conn, workspace_id=workspace["workspace_id"], integration_type=TYPE, config=config(play, workspace),
            instance_key=INSTANCE_KEY, actor="ops@example.com",
        )  # fmt: skip
        queued, _ = repo.request_sync_for_operator(conn, integration_id=integration.id)

    outcome = execute_sync(db, LocalLake(tmp_path / "lake"), INSTANCE_KEY, queued.id, "run-1")

    assert outcome is not None and (outcome.status, outcome.records) == ("succeeded", 1), outcome
    assert not entitled(gateway, workspace, "user-1")
    with db.read() as conn:
        state = conn.execute(sa.select(integrations.c.sync_state).where(integrations.c.id == integration.id)).scalar()
    assert state is not None and "voided_since" in state["google_play"]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/stores.py")
def test_an_app_with_nothing_voided_or_ending_syncs_to_nothing(
    play: FakeGooglePlay, push_token: str, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    target = sync(play, db, workspace, tmp_path)
    assert target.records == 0 and events(db) == [] and grants(db) == []
    assert len(play.calls.voided_lists) == 1 and play.calls.gets == []
