"""What the Google Play tests share around the fake Play Developer API (google_play_fake.py):
the gateway pointed at it, a receipt posted as the app posts it, and what the app's user then
sees (the entitlement answer) or the operator finds (the purchase's grant).

Fixtures stay in each test module (pytest finds them there; imported ones would shadow their
own import), built from `gateway_for` and `google_play_fake.provision`."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from api.app import create_app
from tests.providers.google_play_fake import FakeGooglePlay, settings_for
from warehouse.db import Database
from warehouse.entitlements import ledger
from warehouse.settings import Settings

SOURCE = "android_store"


def gateway_for(settings: Settings, play: FakeGooglePlay, *, timeout_s: float = 10.0) -> FlaskClient:
    """A gateway whose Google Play calls go to the fake."""
    return create_app(settings_for(settings, play, timeout_s=timeout_s)).test_client()


def buy(client: FlaskClient, play: FakeGooglePlay, workspace: dict[str, Any], token: str, user: str = "user-1") -> Any:
    """The app verifying a purchase token for `user` (`POST /api/paywall/receipt`); must be 200."""
    answer = client.post(
        "/api/paywall/receipt",
        json={"provider": SOURCE, "packageName": play.package, "purchaseToken": token},
        headers={"x-user-id": user, "x-app-key": workspace["app_key"]},
    )
    assert answer.status_code == 200, answer.json
    return answer.json


def entitled(client: FlaskClient, workspace: dict[str, Any], user: str = "user-1") -> bool:
    """What the app reads for `user` (`GET /api/paywall/entitlement`)."""
    answer = client.get("/api/paywall/entitlement", headers={"x-user-id": user, "x-app-key": workspace["app_key"]})
    body = answer.json
    assert answer.status_code == 200 and body is not None, body
    return bool(body["active"])


def grant(db: Database, workspace: dict[str, Any], key: str) -> Any:
    """The ledger's grant of the purchase keyed `key` (its first purchase token), or None."""
    with db.read() as conn:
        return ledger.grant_for(conn, app_id=workspace["app_id"], source=SOURCE, store_key=key)
