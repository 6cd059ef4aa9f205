"""POST /api/paywall/token and x-app-token: minted with the app key, usable by its user only."""

from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from tests.support.paywalls import event, landed
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.tables import apps

URL = "/api/paywall/token"


def minting_client(settings: Settings) -> FlaskClient:
    return create_app(replace(settings, app_session_secret="k" * 40)).test_client()


def mint(client: FlaskClient, workspace: dict, user: str | None = "user-7", **headers: str) -> Any:
    sent = {"x-app-key": workspace["app_key"], "x-user-id": user} | headers
    return client.post(URL, headers={k: v for k, v in sent.items() if v is not None})


def send(client: FlaskClient, workspace: dict, token: str, user: str) -> Any:
    body = {"events": [event(workspace["app_id"])]}
    return client.post("/api/paywall/events", json=body, headers={"x-app-token": token, "x-user-id": user})


def test_without_a_secret_minting_is_503(client: FlaskClient, workspace: dict) -> None:
    response = mint(client, workspace)
    assert response.status_code == 503 and response.json == {
        "error": "Token minting is not configured in this environment"
    }
    assert mint(client, workspace, **{"x-app-key": None}).status_code == 401  # the key is checked first


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: workspaces.py")
def test_a_token_stands_in_for_the_key_for_its_user(settings: Settings, db: Database, workspace: dict) -> None:
    client = minting_client(settings)
    response = mint(client, workspace)
    assert response.status_code == 200
    body = response.json
    assert body["token_type"] == "app-session" and body["expires_in"] == 900 and body["token"].startswith("ast_")
    assert send(client, workspace, body["token"], "user-7").json == {"accepted": 1}
    other_user = send(client, workspace, body["token"], "user-8")
    assert other_user.status_code == 401 and "another x-user-id" in other_user.json["error"]
    assert send(client, workspace, body["token"][:-2] + "xx", "user-7").status_code == 401
    assert len(landed(db)) == 1
    with db.write() as conn:
        conn.execute(sa.update(apps).where(apps.c.id == workspace["app_id"]).values(revoked_at=sa.func.now()))
    assert send(client, workspace, body["token"], "user-7").status_code == 401


def test_minting_needs_the_key_and_a_user(settings: Settings, workspace: dict) -> None:
    client = minting_client(settings)
    token = mint(client, workspace).json["token"]
    assert (
        mint(client, workspace, **{"x-app-key": None, "x-app-token": token}).status_code == 401
    )  # no token from a token
    assert mint(client, workspace, **{"x-app-key": "pk_unknown"}).status_code == 401
    assert mint(client, workspace, user=None).status_code == 401
    # A token from one environment is worthless in another (different secret).
    elsewhere = create_app(replace(settings, app_session_secret="z" * 40)).test_client()
    assert send(elsewhere, workspace, token, "user-7").status_code == 401
