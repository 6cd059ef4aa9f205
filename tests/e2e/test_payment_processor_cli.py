"""`flokit admin integrations connect --type payment_processor` as an operator runs it: the Stripe
keys and the app its purchases entitle; `--check` lists the account's events with the key (against
a Stripe that refuses it, and against localstripe on 127.0.0.1)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer

from tests.support.cli import Ran, flokit_in_process
from tests.support.provider_notifications import localstripe

pytestmark = pytest.mark.e2e
SECRET_KEY = "sk_test_0123456789abcdefghij"
WEBHOOK_SECRET = "whsec_0123456789abcdefghijkl"


def flokit(env: dict[str, str], *args: str) -> Ran:
    return flokit_in_process(env, *args)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": database_url}
    env.pop("FLOKIT_SECRET_KEY", None)
    assert flokit(env, "db", "upgrade").returncode == 0  # creates the instance key
    return env


def connect(env: dict[str, str], tmp_path: Path, workspace_id: str, config: Any, *extra: str) -> Any:
    path = tmp_path / "stripe.json"
    path.write_text(json.dumps(config))
    return flokit(
        env, "admin", "integrations", "connect", "--workspace", workspace_id, "--type", "payment_processor",
        "--config", str(path), *extra,
    )  # fmt: skip


def test_connect_takes_the_stripe_keys_and_the_app_and_refuses_what_is_missing(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = flokit(env, "admin", "bootstrap", "--name", "Acme", "--json")
    assert done.returncode == 0, done.stderr
    workspace = json.loads(done.stdout)
    ws = workspace["workspace_id"]
    config = {"secret_key": SECRET_KEY, "webhook_secret": WEBHOOK_SECRET, "app_id": workspace["app_id"]}

    missing = connect(env, tmp_path, ws, {k: v for k, v in config.items() if k != "webhook_secret"})
    assert missing.returncode == 1 and "webhook_secret: is required" in missing.stderr
    foreign = connect(env, tmp_path, ws, config | {"app_id": "app_of_another_workspace"})
    assert foreign.returncode == 1 and "no app app_of_another_workspace" in foreign.stderr
    refusing = HTTPServer(host="127.0.0.1", port=0)
    refusing.expect_request("/v1/events").respond_with_json(
        {"error": {"message": "Invalid API Key provided: sk_test_****ghij", "type": "invalid_request_error"}},
        status=401,
    )
    refusing.start()
    try:
        checked = connect(env, tmp_path, ws, config | {"base_url": refusing.url_for("").rstrip("/")}, "--check")
    finally:
        refusing.stop()
    assert checked.returncode == 1 and "check failed (auth)" in checked.stderr, checked.stderr
    assert "Invalid API Key provided" in checked.stderr and "nothing was saved" in checked.stderr

    connected = connect(env, tmp_path, ws, config | {"base_url": localstripe()}, "--check", "--json")
    assert connected.returncode == 0, connected.stderr
    shown = json.loads(connected.stdout)
    assert shown["check"] == "Stripe: the key can list events; none in the last 30 days"
    assert (shown["type"], shown["status"]) == ("payment_processor", "connected")
    assert shown["options"]["app_id"] == workspace["app_id"]
    assert set(shown["credentials"]) == {"secret_key", "webhook_secret"}
    assert SECRET_KEY not in connected.stdout and WEBHOOK_SECRET not in connected.stdout
