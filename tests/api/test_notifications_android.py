"""Google Play real-time developer notifications through the gateway path `/webhooks/android_store`.

Pub/Sub's push is played with real OIDC id tokens signed by the fake's key (served at the
configured certificates URL) or with the app's push token in the URL; the processor reads the
purchase's state from the fake Play Developer API, as Google says to.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric import rsa
from flask.testing import FlaskClient

from api.notifications.framework import Context, replay
from tests.providers.google_play_fake import (
    PUSH_AUDIENCE,
    FakeGooglePlay,
    developer_notification,
    product,
    provision,
    push_body,
    settings_for,
    subscription,
    voided,
)
from tests.providers.google_play_support import buy, entitled, gateway_for, grant
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.entitlements.tables import store_notifications
from warehouse.events.tables import landed_events
from warehouse.settings import Settings

PATH = "/webhooks/android_store"
NOW = datetime.now(UTC)
DAY = timedelta(days=1)
ORDER = "GPA.3301-0000-1111-22222"
# RTDN SubscriptionNotification.notificationType values (Google's RTDN reference).
RECOVERED, RENEWED, CANCELED, PURCHASED, EXPIRED = 1, 2, 3, 4, 13


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


def stranger() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def sub_note(token: str, kind: int) -> dict[str, Any]:
    return {"subscriptionNotification": {"version": "1.0", "notificationType": kind, "purchaseToken": token}}


def push(client: FlaskClient, play: FakeGooglePlay, note: dict[str, Any], message_id: str, *,
         bearer: str | None = None, query: str = "", package: str | None = None) -> Any:  # fmt: skip
    body = push_body(developer_notification(package or play.package, **note), message_id)
    auth = bearer if bearer is not None else play.mint_id_token(PUSH_AUDIENCE)
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {auth}"} if auth else {})
    return client.post(PATH + query, data=body, headers=headers)


def stored(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(store_notifications)).scalar_one())


def events(db: Database) -> dict[str, Any]:
    with db.read() as conn:
        return {r.event_id: r for r in conn.execute(sa.select(landed_events))}


def test_a_renewal_reads_the_state_from_google_and_extends_access(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY)
    buy(gateway, play, workspace, "tok-1")
    renewed_until = NOW + 31 * DAY
    play.subscriptions["tok-1"] = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=renewed_until, order=ORDER + "..0", acknowledged=True
    )

    answer = push(gateway, play, sub_note("tok-1", RENEWED), "msg-renew-1")

    assert answer.status_code == 200, answer.json
    assert answer.json["status"] == "applied"
    assert abs(grant(db, workspace, "tok-1").expires_at - renewed_until) < timedelta(milliseconds=1)
    with db.read() as conn:
        two_days_on = ledger.current(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"],
                                     user_id="user-1", now=NOW + 2 * DAY)  # fmt: skip
    assert two_days_on.active  # would have lapsed without the renewal
    renewal = events(db)[f"gp:{ORDER}..0:renewal"]
    assert renewal.user_id == "user-1" and renewal.properties["revenue"] == 9.99
    assert play.calls.gets.count("subscriptionsv2:tok-1") == 2  # the receipt's read, then the signal's


def test_a_duplicate_message_is_applied_once(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, acknowledged=True)
    first = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-dup")
    again = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-dup")
    assert (first.status_code, first.json["status"]) == (200, "applied")
    assert (again.status_code, again.json["status"]) == (200, "duplicate")
    assert stored(db) == 1
    assert play.calls.gets.count("subscriptionsv2:tok-1") == 1


def test_a_purchase_announced_before_its_receipt_is_recorded_acknowledged_and_linked_later(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-new"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 30 * DAY)
    assert push(gateway, play, sub_note("tok-new", PURCHASED), "msg-new").status_code == 200
    assert grant(db, workspace, "tok-new").user_id is None
    assert play.calls.acknowledged == [("subscriptions", "pro_monthly", "tok-new")]
    buy(gateway, play, workspace, "tok-new")
    assert grant(db, workspace, "tok-new").user_id == "user-1"
    assert entitled(gateway, workspace)
    assert len(play.calls.acknowledged) == 1


def test_a_cancellation_keeps_access_until_expiry_and_lands_once(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 9 * DAY)
    buy(gateway, play, workspace, "tok-1")
    cancelled_at = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    play.subscriptions["tok-1"] = subscription(
        "SUBSCRIPTION_STATE_CANCELED", expires=NOW + 9 * DAY, auto_renew=False, acknowledged=True,
        canceled={"userInitiatedCancellation": {"cancelTime": cancelled_at}},
    )  # fmt: skip
    assert push(gateway, play, sub_note("tok-1", CANCELED), "msg-cxl").status_code == 200
    assert entitled(gateway, workspace)
    assert grant(db, workspace, "tok-1").auto_renew is False
    assert events(db)[f"gp:{ORDER}:cancellation"].user_id == "user-1"
    play.subscriptions["tok-1"] = subscription(
        "SUBSCRIPTION_STATE_EXPIRED", expires=NOW - timedelta(seconds=1), auto_renew=False, acknowledged=True,
        canceled={"userInitiatedCancellation": {}},
    )  # fmt: skip
    assert push(gateway, play, sub_note("tok-1", EXPIRED), "msg-exp").status_code == 200
    assert not entitled(gateway, workspace)


def test_a_voided_purchase_is_inactive_at_once_with_a_refund(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    buy(gateway, play, workspace, "tok-1")
    assert entitled(gateway, workspace)
    play.voided = [voided("tok-1", ORDER, voided_at=datetime.now(UTC))]
    void = {"voidedPurchaseNotification": {"purchaseToken": "tok-1", "orderId": ORDER, "productType": 1,
                                           "refundType": 1}}  # fmt: skip
    answer = push(gateway, play, void, "msg-void")
    assert answer.status_code == 200, answer.json
    assert not entitled(gateway, workspace)
    revoked = grant(db, workspace, "tok-1")
    assert revoked.revoked_at is not None and revoked.product_id == "pro_monthly"
    refund = events(db)[f"gp:{ORDER}:refund"]
    assert refund.user_id == "user-1" and refund.properties["revenue"] is None


def test_an_upgrade_makes_its_new_token_current_and_the_older_token_never_takes_it_back(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    now = datetime.now(UTC)
    play.subscriptions["tok-a"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=now + 20 * DAY)
    buy(gateway, play, workspace, "tok-a")
    assert grant(db, workspace, "tok-a").current_token == "tok-a"
    # Upgraded in the app: a new token linking to the first, which Google then calls replaced.
    play.subscriptions["tok-b"] = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=now + 365 * DAY, product="pro_yearly", order="GPA.3301-5555-6666-77777",
        linked="tok-a",
    )  # fmt: skip
    play.subscriptions["tok-a"] = subscription(
        "SUBSCRIPTION_STATE_EXPIRED", expires=now - DAY, canceled={"replacementCancellation": {}}, acknowledged=True
    )

    assert push(gateway, play, sub_note("tok-b", PURCHASED), "msg-upgrade").json["status"] == "applied"

    upgraded = grant(db, workspace, "tok-a")
    assert (upgraded.product_id, upgraded.current_token) == ("pro_yearly", "tok-b")
    # The first token's own notification, delivered late, states nothing.
    assert push(gateway, play, sub_note("tok-a", CANCELED), "msg-late").status_code == 200
    # A refund of the first token's order revokes the purchase but names no newer token.
    play.voided = [voided("tok-a", ORDER, voided_at=datetime.now(UTC))]
    void = {"voidedPurchaseNotification": {"purchaseToken": "tok-a", "orderId": ORDER, "productType": 1,
                                           "refundType": 1}}  # fmt: skip
    assert push(gateway, play, void, "msg-void-a").status_code == 200
    revoked = grant(db, workspace, "tok-a")
    assert revoked.revoked_at is not None and revoked.current_token == "tok-b"
    assert not entitled(gateway, workspace)


def test_a_test_notification_is_200_and_not_stored(gateway: FlaskClient, play: FakeGooglePlay, db: Database) -> None:
    answer = push(gateway, play, {"testNotification": {"version": "1.0"}}, "msg-test")
    assert answer.status_code == 200 and answer.json["status"] == "ignored"
    assert stored(db) == 0


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda play: play.mint_id_token("https://someone-else.test/push"), id="other-audience"),
        pytest.param(lambda play: play.mint_id_token(PUSH_AUDIENCE, expires_in=-600), id="expired"),
        pytest.param(lambda play: play.mint_id_token(PUSH_AUDIENCE, email_verified=False), id="unverified-email"),
        pytest.param(lambda play: play.mint_id_token(PUSH_AUDIENCE, issuer="https://evil.test"), id="other-issuer"),
        pytest.param(lambda play: play.mint_id_token(PUSH_AUDIENCE, key=stranger()), id="other-key"),
        # Google signs ID tokens for any audience for any account: the forged push, a
        # valid Google signature for the right audience, of an account that is not the push's.
        pytest.param(
            lambda play: play.mint_id_token(PUSH_AUDIENCE, email="attacker@gmail.com"), id="other-google-account"
        ),
        pytest.param(lambda play: "", id="none"),
    ],
)
def test_an_unverifiable_push_is_401_and_nothing_is_stored_or_applied(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, token: Any
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY)
    answer = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-bad", bearer=token(play))
    assert answer.status_code == 401
    assert stored(db) == 0
    assert grant(db, workspace, "tok-1") is None
    assert play.calls.gets == []


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/stores.py")
def test_the_push_token_in_the_url_authenticates_its_own_app_only(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database, push_token: str
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, acknowledged=True)
    wrong = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-q1", bearer="", query="?token=not-the-token")
    assert wrong.status_code == 401
    other_package = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-q2", bearer="",
                         query=f"?token={push_token}", package="com.other.app")  # fmt: skip
    assert other_package.status_code == 401
    assert stored(db) == 0
    right = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-q3", bearer="", query=f"?token={push_token}")
    assert right.status_code == 200, right.json
    assert grant(db, workspace, "tok-1") is not None


def test_an_authenticated_but_malformed_push_is_400(gateway: FlaskClient, play: FakeGooglePlay, db: Database) -> None:
    bearer = {"Authorization": f"Bearer {play.mint_id_token(PUSH_AUDIENCE)}", "Content-Type": "application/json"}
    answer = gateway.post(PATH, data=json.dumps({"message": {"data": "%%%"}}), headers=bearer)
    assert answer.status_code == 400
    # Unauthenticated, the body is not even read.
    assert gateway.post(PATH, data=b"{}", headers={"Content-Type": "application/json"}).status_code == 401
    assert stored(db) == 0


def test_google_unreachable_is_5xx_and_the_notification_waits_for_replay(
    settings: Settings, gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, acknowledged=True)
    play.delay_s = 1.5  # longer than the 0.5 s this gateway waits
    answer = push(gateway_for(settings, play, timeout_s=0.5), play, sub_note("tok-1", PURCHASED), "msg-slow")
    assert answer.status_code == 504
    assert stored(db) == 1 and grant(db, workspace, "tok-1") is None
    play.delay_s = 0
    retried = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-slow")  # Pub/Sub redelivers
    assert retried.status_code == 200 and retried.json["status"] == "applied"
    assert grant(db, workspace, "tok-1") is not None


def test_replay_applies_stored_notifications_again_without_their_time_bound_token(
    settings: Settings, gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, acknowledged=True)
    play.delay_s = 1.5
    impatient = gateway_for(settings, play, timeout_s=0.5)
    assert push(impatient, play, sub_note("tok-1", PURCHASED), "msg-replay").status_code == 504
    play.delay_s = 0
    # Replayed later, once the OIDC token has long expired: the stored bytes were verified on receipt.
    ctx = Context(settings=settings_for(settings, play), database=db)
    result = replay(ctx, provider="android_store", since=NOW - DAY)
    assert (result.applied, result.failed) == (1, 0), result.errors
    assert grant(db, workspace, "tok-1").expires_at > NOW


def test_a_recovery_from_account_hold_restores_access(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ON_HOLD", expires=NOW - DAY, acknowledged=True)
    buy(gateway, play, workspace, "tok-1")
    assert not entitled(gateway, workspace)
    play.subscriptions["tok-1"] = subscription(
        "SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 30 * DAY, order=ORDER + "..1", acknowledged=True
    )
    assert push(gateway, play, sub_note("tok-1", RECOVERED), "msg-recovered").status_code == 200
    assert entitled(gateway, workspace)


def test_one_time_products_are_read_acknowledged_and_voided(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    play.products[("lifetime_unlock", "tok-p")] = product(account_id="user-1")
    note = {"oneTimeProductNotification": {"version": "1.0", "notificationType": 1, "purchaseToken": "tok-p",
                                           "sku": "lifetime_unlock"}}  # fmt: skip
    assert push(gateway, play, note, "msg-otp").status_code == 200
    assert play.calls.acknowledged == [("products", "lifetime_unlock", "tok-p")]
    assert grant(db, workspace, "tok-p").kind == "lifetime"
    answer = gateway.post(
        "/api/paywall/receipt",
        json={"provider": "android_store", "packageName": play.package, "purchaseToken": "tok-p",
              "productId": "lifetime_unlock"},
        headers={"x-user-id": "user-1", "x-app-key": workspace["app_key"]},
    )  # fmt: skip
    assert answer.status_code == 200 and entitled(gateway, workspace)
    play.voided = [voided("tok-p", "GPA.3301-9999-8888-77777", voided_at=datetime.now(UTC))]
    void = {"voidedPurchaseNotification": {"purchaseToken": "tok-p", "orderId": "GPA.3301-9999-8888-77777",
                                           "productType": 2, "refundType": 1}}  # fmt: skip
    assert push(gateway, play, void, "msg-otp-void").status_code == 200
    assert not entitled(gateway, workspace)
    assert "gp:GPA.3301-9999-8888-77777:refund" in events(db)


def test_an_app_with_an_audience_but_no_push_service_account_refuses_oidc_pushes(
    settings: Settings, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    """Set up before the push service account existed: the audience alone proves nothing, so the
    operator must set it (`--android-push-service-account`); the push token URL still works."""
    push_token = provision(db, workspace["app_id"], play, push_service_account=None)
    gateway = gateway_for(settings, play)
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + DAY, acknowledged=True)
    refused = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-oidc")
    assert refused.status_code == 401
    assert stored(db) == 0 and play.calls.gets == []
    by_url = push(gateway, play, sub_note("tok-1", PURCHASED), "msg-url", bearer="", query=f"?token={push_token}")
    assert by_url.status_code == 200, by_url.json


def void_note(token: str, order: str, **extra: Any) -> dict[str, Any]:
    return {"voidedPurchaseNotification": {"purchaseToken": token, "orderId": order, "productType": 1,
                                           "refundType": 1}, **extra}  # fmt: skip


def test_a_void_google_does_not_confirm_changes_nothing(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    """A voided-purchase notification is only a signal: Google's voided purchases must list it."""
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    buy(gateway, play, workspace, "tok-1")
    before = grant(db, workspace, "tok-1")

    # A victim's active purchase, Google has no void of it.
    answer = push(gateway, play, void_note("tok-1", ORDER), "msg-void-unconfirmed")
    assert answer.status_code == 200, answer.json  # Pub/Sub stops retrying
    assert entitled(gateway, workspace)
    after = grant(db, workspace, "tok-1")
    assert after.revoked_at is None and after.stated_at == before.stated_at
    # A made-up token and order: no grant and no refund in the reports.
    made_up = void_note("tok-made-up", "GPA.0000-0000-0000-00000")
    assert push(gateway, play, made_up, "msg-void-made-up").status_code == 200
    assert grant(db, workspace, "tok-made-up") is None
    # Google lists a void of another order of the purchase only: this order's is not confirmed.
    play.voided = [voided("tok-1", ORDER + "..0", voided_at=NOW)]
    assert push(gateway, play, void_note("tok-1", ORDER), "msg-void-other-order").status_code == 200
    assert entitled(gateway, workspace)
    assert not [e for e in events(db).values() if e.event_type == "refund"]
    assert len(play.calls.voided_lists) == 3  # Google was asked each time


def test_a_confirmed_void_is_applied_at_googles_time_not_the_notifications(
    gateway: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], db: Database
) -> None:
    """The issue's void dated 2100 froze the grant: the revocation is Google's record, its time too."""
    play.subscriptions["tok-1"] = subscription("SUBSCRIPTION_STATE_ACTIVE", expires=NOW + 20 * DAY)
    buy(gateway, play, workspace, "tok-1")
    voided_at = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    play.voided = [voided("tok-1", ORDER, voided_at=voided_at)]
    year_2100 = str(int(datetime(2100, 1, 1, tzinfo=UTC).timestamp() * 1000))
    answer = push(gateway, play, void_note("tok-1", ORDER, eventTimeMillis=year_2100), "msg-void-2100")
    assert answer.status_code == 200, answer.json
    assert not entitled(gateway, workspace)
    revoked = grant(db, workspace, "tok-1")
    assert revoked.revoked_at == voided_at and revoked.stated_at < datetime.now(UTC) + timedelta(minutes=5)
    assert events(db)[f"gp:{ORDER}:refund"].user_id == "user-1"


def jose(header: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(header).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "bearer",
    [
        pytest.param("not-a-jwt", id="opaque"),
        pytest.param("a.b.c", id="three-parts-no-json"),
        pytest.param(f"{jose({'alg': 'none', 'kid': 'k'})}.e30.", id="alg-none"),
        pytest.param(f"{jose({'alg': 'HS256', 'kid': 'k'})}.e30.c2ln", id="hs256"),
        pytest.param(f"{jose({'alg': 'RS256'})}.e30.c2ln", id="no-kid"),
        pytest.param(f"{jose({'alg': 'RS256', 'kid': 'k'})}.e30.c2ln.d", id="four-parts"),
        pytest.param(f"{jose({'alg': 'RS256', 'kid': 'k'})}.e30!.c2ln", id="not-base64url"),
    ],
)
def test_a_token_that_is_not_a_google_jwt_is_401_before_any_certificate_fetch(
    gateway: FlaskClient, play: FakeGooglePlay, db: Database, bearer: str
) -> None:
    answer = push(gateway, play, {"testNotification": {"version": "1.0"}}, "msg-shape", bearer=bearer)
    assert answer.status_code == 401
    assert play.calls.certs == 0 and stored(db) == 0


def test_googles_certificates_are_fetched_once_per_their_max_age(
    settings: Settings, gateway: FlaskClient, play: FakeGooglePlay, db: Database
) -> None:
    for n in range(3):
        assert push(gateway, play, {"testNotification": {"version": "1.0"}}, f"msg-{n}").status_code == 200
    assert play.calls.certs == 1
    # A key the certificates lack (a made-up kid) costs no fetch a minute after the last.
    unknown = play.mint_id_token(PUSH_AUDIENCE, key=stranger(), kid="made-up-kid")
    assert push(gateway, play, {"testNotification": {"version": "1.0"}}, "msg-kid", bearer=unknown).status_code == 401
    assert play.calls.certs == 1
    # Answered with max-age=0, they are fetched again for each push (another process: its own cache).
    play.certs_max_age = 0
    fresh = gateway_for(settings, play)
    for n in range(2):
        assert push(fresh, play, {"testNotification": {"version": "1.0"}}, f"msg-again-{n}").status_code == 200
    assert play.calls.certs == 3
