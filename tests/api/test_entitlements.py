"""Entitlement reads over the ledger, and what every receipt answer shares whatever the store.

Each store's verification has its own suite (test_receipts_ios.py, test_receipts_android.py);
here the ledger is fed with facts directly, as a verified receipt or a notification would, and
the gateway's reads are checked against the clock: a subscription that lapses stops granting with
no notification, a grace period grants until its end, a revocation at once, a lifetime purchase
forever, a consumable never.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.support.entitlements import fact as entitlement_fact
from tests.support.entitlements import receipt, statement
from transforms.entitlements.facts import StoreFact
from warehouse import workspaces
from warehouse.db import Database
from warehouse.entitlements import ledger

NOW = datetime.now(UTC)


def fact(key: str = "1000001", **overrides: Any) -> StoreFact:
    return entitlement_fact(key, now=NOW, **overrides)  # the times this suite's checks are relative to


def headers(workspace: dict, user: str = "user-7") -> dict[str, str]:
    return {"x-user-id": user, "x-app-key": workspace["app_key"]}


def entitlement(client: FlaskClient, workspace: dict, user: str = "user-7") -> Any:
    response = client.get("/api/paywall/entitlement", headers=headers(workspace, user))
    assert response.status_code == 200
    return response.json


def at(db: Database, workspace: dict, when: datetime, user: str = "user-7") -> bool:
    with db.read() as conn:
        return ledger.current(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user, now=when
        ).active


def test_a_linked_purchase_is_the_users_entitlement_until_it_lapses(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    assert entitlement(client, workspace) == {"active": False, "source": "none"}
    receipt(db, workspace, "user-7", fact())
    assert entitlement(client, workspace) == {"active": True, "source": "iap"}
    current = client.get(
        "/api/entitlements/current", query_string={"userId": "user-7"}, headers={"x-app-key": workspace["app_key"]}
    )
    assert current.json == {"active": True, "source": "iap"}
    assert entitlement(client, workspace, "user-8") == {"active": False, "source": "none"}
    # No notification needed: past the period's end the same row answers inactive.
    assert at(db, workspace, NOW + timedelta(days=28)) is True
    assert at(db, workspace, NOW + timedelta(days=29, seconds=1)) is False


def test_lapsed_refunded_grace_lifetime_and_consumable(client: FlaskClient, db: Database, workspace: dict) -> None:
    receipt(db, workspace, "lapsed", fact("a", expires_at=NOW - timedelta(hours=1)))
    assert entitlement(client, workspace, "lapsed") == {"active": False, "source": "iap"}
    grace = fact("b", expires_at=NOW - timedelta(hours=1), grace_ends_at=NOW + timedelta(days=3))
    receipt(db, workspace, "grace", grace)
    assert entitlement(client, workspace, "grace")["active"] is True
    assert at(db, workspace, NOW + timedelta(days=3, seconds=1), "grace") is False
    receipt(db, workspace, "lifetime", fact("c", kind="lifetime", expires_at=None))
    assert at(db, workspace, NOW + timedelta(days=3650), "lifetime") is True
    receipt(db, workspace, "coins", fact("d", kind="consumable", expires_at=None))
    assert entitlement(client, workspace, "coins")["active"] is False
    # A refund stated later switches the paying user off at once.
    receipt(db, workspace, "refunded", fact("e"))
    statement(db, workspace, fact("e", stated_at=NOW, revoked_at=NOW - timedelta(seconds=1), revocation_reason="1"))
    assert entitlement(client, workspace, "refunded")["active"] is False
    # Any active purchase grants, whatever the others say; web purchases answer `web`.
    receipt(db, workspace, "lapsed", fact("f", source="payment_processor", channel="web"))
    assert entitlement(client, workspace, "lapsed") == {"active": True, "source": "web"}


def test_a_purchase_belongs_to_the_first_user_who_shows_it(db: Database, workspace: dict) -> None:
    receipt(db, workspace, "payer", fact())
    # Shown again under another id, lapsed or not: refused, and the payer keeps access.
    for lapsed in (fact(stated_at=NOW, expires_at=NOW - timedelta(days=1)), fact(stated_at=NOW)):
        with pytest.raises(ledger.NotTheBuyer):
            receipt(db, workspace, "attacker", lapsed)
    assert at(db, workspace, NOW, "payer") is True
    assert at(db, workspace, NOW, "attacker") is False
    # The payer's own receipt again is fine (restore on a new device).
    assert receipt(db, workspace, "payer", fact()).user_id == "payer"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/ledger.py")
def test_the_stores_buyer_token_must_name_the_user(db: Database, workspace: dict) -> None:
    from transforms.entitlements.identity import apple_account_token

    token = apple_account_token("user-42")
    with pytest.raises(ledger.NotTheBuyer):
        receipt(db, workspace, "user-43", fact(account_token=token))
    assert receipt(db, workspace, "user-42", fact(account_token=token)).created is True


def test_statements_follow_the_latest_and_move_only_on_transfer(db: Database, workspace: dict) -> None:
    receipt(db, workspace, "u1", fact(stated_at=NOW - timedelta(hours=2)))
    # An older statement delivered late changes nothing.
    late = statement(db, workspace, fact(stated_at=NOW - timedelta(hours=3), expires_at=NOW - timedelta(days=1)))
    assert late.state_changed is False and at(db, workspace, NOW, "u1") is True
    # A provider naming another user without a transfer does not move the purchase.
    other = statement(db, workspace, fact(stated_at=NOW - timedelta(hours=1), user_hint="u2"))
    assert other.user_id == "u1"
    moved = statement(db, workspace, fact(stated_at=NOW, user_hint="u2", transfer=True))
    assert (moved.previous_user_id, moved.user_id) == ("u1", "u2")
    assert at(db, workspace, NOW, "u1") is False and at(db, workspace, NOW, "u2") is True
    # A notification about a purchase nobody showed yet is kept, and the first receipt links it.
    unseen = statement(db, workspace, fact("9", stated_at=NOW))
    assert unseen.created is True and unseen.user_id is None
    assert receipt(db, workspace, "u3", fact("9", stated_at=NOW - timedelta(days=2))).user_id == "u3"
    assert at(db, workspace, NOW, "u3") is True


def test_answers_about_a_user_are_private(client: FlaskClient, workspace: dict) -> None:
    for path in ("/api/paywall/entitlement", "/api/entitlements/current"):
        response = client.get(path, headers=headers(workspace))
        assert response.headers["Cache-Control"] == "private, no-store"
        assert {v.strip().lower() for v in response.headers["Vary"].split(",")} >= {
            "x-app-key",
            "x-app-token",
            "x-user-id",
        }


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: entitlements/stores.py")
def test_receipt_validation_and_identity(client: FlaskClient, workspace: dict) -> None:
    android = {"provider": "android_store", "packageName": "com.acme.fit", "purchaseToken": "t"}
    for body in ({"provider": "ios_store"}, {"provider": "android_store", "packageName": "x"}, {"provider": "web"}, {}):
        response = client.post("/api/paywall/receipt", json=body, headers=headers(workspace))
        assert response.status_code == 400 and set(response.json) == {"error"}, body
    assert client.post("/api/paywall/receipt", json=android, headers={}).status_code == 401
    bad_key = client.post("/api/paywall/receipt", json=android, headers={"x-user-id": "u", "x-app-key": "pk_no"})
    assert bad_key.status_code == 401
    # An app without store identities is "no tenant provisioned": 422.
    unprovisioned = client.post("/api/paywall/receipt", json=android, headers=headers(workspace))
    assert unprovisioned.status_code == 422 and set(unprovisioned.json) == {"error"}


NOT_A_JWS = ("refunded", "a.b", "a.b.c.d", "a..c", "a.b.c=", "a.b+/.c", " a.b.c")


def test_a_receipt_that_is_not_a_jws_is_refused_before_any_store(client: FlaskClient, workspace: dict) -> None:
    expected = {
        "error": "Invalid body field 'signedTransactionInfo': must be a JWS: three base64url parts separated by dots"
    }
    for bad in NOT_A_JWS:
        body = {"provider": "ios_store", "signedTransactionInfo": bad}
        response = client.post("/api/paywall/receipt", json=body, headers=headers(workspace))
        assert response.status_code == 400 and response.json == expected, bad


def test_entitlement_reads_need_a_key_or_token_and_a_user(client: FlaskClient, db: Database, workspace: dict) -> None:
    assert client.get("/api/paywall/entitlement", headers={"x-user-id": "u"}).status_code == 401
    assert client.get("/api/paywall/entitlement", headers={"x-app-key": workspace["app_key"]}).status_code == 401
    assert client.get("/api/paywall/entitlement", headers={"x-app-key": "pk_no", "x-user-id": "u"}).status_code == 401
    assert client.get("/api/entitlements/current", headers={"x-app-key": workspace["app_key"]}).status_code == 401
    mine = {"x-app-key": workspace["app_key"], "x-user-id": "u"}
    assert client.get("/api/paywall/entitlement", headers=mine).status_code == 200
    with db.write() as conn:
        workspaces.revoke_app(conn, app_id=workspace["app_id"])
    assert client.get("/api/paywall/entitlement", headers=mine).status_code == 401  # a revoked key
