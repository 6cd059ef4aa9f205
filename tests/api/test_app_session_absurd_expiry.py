"""A validly signed app-session token whose expiry no clock can hold is refused (401), never a 500."""

import json
from dataclasses import replace

import pytest

from api.app import create_app
from tests.support.paywalls import event
from transforms import app_session
from warehouse.settings import Settings

SECRET = "k" * 40


def signed_token(app_id: str, user: str, expiry: object) -> str:
    """A token signed by the real signing code with the service secret, carrying `expiry` as is."""
    claims = {"a": app_id, "u": user, "x": expiry}
    payload = app_session._b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"{app_session.PREFIX}{payload}.{app_session._sign(SECRET.encode(), payload)}"


@pytest.mark.parametrize("expiry", [10**20, -(10**20), 10**400, 253402300800])
def test_an_absurd_expiry_is_401(settings: Settings, workspace: dict, expiry: int) -> None:
    client = create_app(replace(settings, app_session_secret=SECRET)).test_client()
    token = signed_token(workspace["app_id"], "user-7", expiry)
    headers = {"x-app-token": token, "x-user-id": "user-7"}
    read = client.get("/api/paywall/entitlement", headers=headers)
    assert read.status_code == 401 and "error" in read.json
    sent = client.post("/api/paywall/events", json={"events": [event(workspace["app_id"])]}, headers=headers)
    assert sent.status_code == 401 and "error" in sent.json
    # The same code signs a sane expiry that works, so the 401 above is the expiry's doing.
    good = signed_token(workspace["app_id"], "user-7", 4_000_000_000)
    ok = client.get("/api/paywall/entitlement", headers={"x-app-token": good, "x-user-id": "user-7"})
    assert ok.status_code == 200
