"""`flokit admin apps stores` as an operator runs it: set an app's store identities, see them
(secrets never again), and the refusals that keep notifications from finding the wrong app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.e2e import test_integrations_cli as cli
from warehouse.db import database_for
from warehouse.entitlements.tables import app_stores

pytestmark = pytest.mark.e2e
env = cli.env  # the fixture: a migrated database and an instance key
flokit = cli.flokit


def app_of(env: dict[str, str], name: str = "Acme") -> str:
    done = flokit(env, "admin", "bootstrap", "--name", name, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["app_id"])


def service_account(tmp_path: Path) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    path = tmp_path / "play.json"
    path.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "acme",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "flokit@acme.iam.gserviceaccount.com",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    return path


def test_set_show_and_refuse(env: dict[str, str], tmp_path: Path) -> None:
    app_id = app_of(env)
    no_id = flokit(env, "admin", "apps", "stores", "--app", app_id, "--ios-bundle-id", "com.acme.fit",
                   "--ios-environment", "Production")  # fmt: skip
    assert no_id.returncode == 1 and "--ios-app-apple-id is required" in no_id.stderr
    done = flokit(
        env, "admin", "apps", "stores", "--app", app_id, "--ios-bundle-id", "com.acme.fit", "--ios-app-apple-id",
        "1234567890", "--ios-environment", "Production", "--android-package", "com.acme.fit",
        "--android-service-account", str(service_account(tmp_path)), "--new-android-push-token", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["ios"] == {"bundle_id": "com.acme.fit", "app_apple_id": 1234567890, "environment": "Production"}
    assert shown["android"]["service_account"] == "flokit@acme.iam.gserviceaccount.com"
    token = shown["android_push_token"]
    assert shown["android_push_path"] == f"/webhooks/android_store?token={token}" and len(token) >= 40

    # Shown again: identities, never the key or the token.
    again = flokit(env, "admin", "apps", "stores", "--app", app_id, "--json")
    assert again.returncode == 0
    assert "android_push_token" not in json.loads(again.stdout) and token not in again.stdout
    assert json.loads(again.stdout)["android"]["push_token_set"] is True
    # At rest the key is sealed: the private key's text is nowhere in the row.
    # database_for: the cached engine the fixture closes (no connection left for the garbage
    # collector to find open during a later test).
    with database_for(env["FLOKIT_DATABASE_URL"]).read() as conn:
        row = conn.execute(sa.select(app_stores).where(app_stores.c.app_id == app_id)).one()
    assert "PRIVATE KEY" not in row.android_credentials and token not in str(row._mapping)

    # Another app cannot take the same bundle id or package: notifications could not tell them apart.
    other = app_of(env, "Other")
    taken = flokit(env, "admin", "apps", "stores", "--app", other, "--android-package", "com.acme.fit")
    assert taken.returncode == 1 and app_id in taken.stderr
    bad_key = tmp_path / "bad.json"
    bad_key.write_text(
        json.dumps({"type": "authorized_user", "client_email": "x", "private_key": "y", "token_uri": "z"})
    )
    refused = flokit(env, "admin", "apps", "stores", "--app", other, "--android-service-account", str(bad_key))
    assert refused.returncode == 1 and "not a service_account key" in refused.stderr
    missing = flokit(env, "admin", "apps", "stores", "--app", "app_nope", "--ios-bundle-id", "x.y")
    assert missing.returncode == 1 and "no app app_nope" in missing.stderr


def test_the_push_audience_wants_the_push_service_account(env: dict[str, str]) -> None:
    """Google signs ID tokens for any audience for any account: an audience alone is refused at
    push time, and the command says so until the push subscription's service account is set."""
    app_id = app_of(env)
    audience = "https://flokit.example/webhooks/android_store"
    audience_only = flokit(env, "admin", "apps", "stores", "--app", app_id, "--android-package", "com.acme.fit",
                           "--android-push-audience", audience, "--json")  # fmt: skip
    assert audience_only.returncode == 0, audience_only.stderr
    assert "--android-push-service-account" in audience_only.stderr and "refused" in audience_only.stderr
    bad = flokit(env, "admin", "apps", "stores", "--app", app_id, "--android-push-service-account", "not an e-mail")
    assert bad.returncode == 1 and "must be an e-mail" in bad.stderr
    done = flokit(env, "admin", "apps", "stores", "--app", app_id, "--android-push-service-account",
                  "RTDN-Push@acme.iam.gserviceaccount.com", "--json")  # fmt: skip
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    shown = json.loads(done.stdout)["android"]
    assert shown["push_service_account"] == "rtdn-push@acme.iam.gserviceaccount.com"
    assert shown["push_audience"] == audience
