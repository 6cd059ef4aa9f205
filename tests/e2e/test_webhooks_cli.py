"""`flokit admin webhooks ...` as an operator runs it: real subprocesses, JSON out."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta

import pytest

from api.app import create_app
from tests.support import WEBHOOK_KEY, bearer
from tests.support.cli import run, run_json
from warehouse.db import database_for, utcnow
from warehouse.settings import Settings
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.deliveries import SendResult
from warehouse.webhooks.outbox import emit_event

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def instance_key(settings: Settings) -> None:
    """The instance key `flokit db upgrade` would create: signing secrets are sealed with it, and
    the deliveries the tests claim themselves are unsealed with it."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "instance.key").write_text(WEBHOOK_KEY + "\n")


def test_webhook_admin_commands(settings: Settings, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    refused = run(
        settings, "admin", "webhooks", "add", "--workspace", ws, "--url", "http://127.0.0.1:9/h",
        "--events", "action.approved", "--json", ok=False,
    )  # fmt: skip
    assert refused.returncode == 1 and "https" in json.loads(refused.stderr)["error"]

    dev = dataclasses.replace(settings, webhooks_allow_private=True)
    added = run_json(
        dev, "admin", "webhooks", "add", "--workspace", ws, "--url", "http://127.0.0.1:9/h",
        "--events", "action.approved,integration.error", "--standard-webhooks",
    )  # fmt: skip
    endpoint_id, secret = added["endpoint_id"], added["signing_secret"]
    assert endpoint_id.startswith("whe_") and secret.startswith("whsec_")
    assert added["events"] == ["action.approved", "integration.error"] and added["standard_webhooks"] is True

    bad = run(dev, "admin", "webhooks", "add", "--workspace", ws, "--url", "http://127.0.0.1:9/h",
              "--events", "action.deleted", "--json", ok=False)  # fmt: skip
    assert bad.returncode == 1 and "unknown event type" in json.loads(bad.stderr)["error"]

    listed = run_json(dev, "admin", "webhooks", "list", "--workspace", ws)
    assert [(e["endpoint_id"], e["status"], e["url"]) for e in listed["endpoints"]] == [
        (endpoint_id, "enabled", "http://127.0.0.1:9/h")
    ]
    assert "signing_secret" not in listed["endpoints"][0]

    assert run_json(dev, "admin", "webhooks", "disable", "--endpoint", endpoint_id)["status"] == "disabled"
    assert run_json(dev, "admin", "webhooks", "list", "--workspace", ws)["endpoints"][0]["status"] == "disabled"
    assert run_json(dev, "admin", "webhooks", "enable", "--endpoint", endpoint_id)["status"] == "enabled"

    rotated = run_json(dev, "admin", "webhooks", "rotate-secret", "--endpoint", endpoint_id)
    assert rotated["signing_secret"].startswith("whsec_") and rotated["signing_secret"] != secret
    assert rotated["previous_secret_expires_at"].endswith("Z")

    client = create_app(dev).test_client()
    sent = client.post(
        "/v1/webhooks/test", json={"event_type": "action.approved"}, headers=bearer(workspace["api_key_read_write"])
    )
    assert sent.status_code == 202
    history = run_json(dev, "admin", "webhooks", "deliveries", "--endpoint", endpoint_id)
    [delivery] = history["deliveries"]
    assert delivery["delivery_id"] == sent.json["delivery_id"] and delivery["event_id"] == sent.json["event_id"]
    assert delivery["attempt"] == 0 and delivery["status"] == "pending" and delivery["attempts"] == []
    assert set(delivery) >= {"status_code", "error", "created_at", "next_attempt_at", "completed_at"}

    human = run(dev, "admin", "webhooks", "deliveries", "--endpoint", endpoint_id).stdout
    assert sent.json["delivery_id"] in human
    missing = run(dev, "admin", "webhooks", "enable", "--endpoint", "whe_missing", "--json", ok=False)
    assert missing.returncode == 1 and json.loads(missing.stderr) == {"error": "no endpoint whe_missing"}


def test_redeliver_sends_failed_deliveries_again(settings: Settings, workspace: dict) -> None:
    """An operator brings back deliveries that failed for good, all, since a time, or one."""
    dev = dataclasses.replace(settings, webhooks_allow_private=True)
    db = database_for(dev.database_url)
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url="http://127.0.0.1:9/h", events=["action.created"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
        start = utcnow() - timedelta(days=2)
        for i in range(2):
            emit_event(
                conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={"i": i}, now=start
            )
    for n in range(6):  # six failed attempts, the endpoint re-enabled after each disabling
        at = start + timedelta(hours=7 * n)
        with db.write() as conn:
            batch = deliveries.claim(conn, now=at, limit=10, lease=timedelta(seconds=20), instance_key=WEBHOOK_KEY)
            failed = SendResult(status_code=500, error="HTTP 500", started_at=at, finished_at=at)
            deliveries.record_batch(conn, [(c, failed) for c in batch])
            endpoints.set_enabled(conn, endpoint_id=endpoint.id, enabled=True)
    history = run_json(dev, "admin", "webhooks", "deliveries", "--endpoint", endpoint.id)["deliveries"]
    assert [d["status"] for d in history] == ["failed", "failed"]
    first, second = sorted(d["delivery_id"] for d in history)

    none = run_json(dev, "admin", "webhooks", "redeliver", "--endpoint", endpoint.id, "--since", "1h")
    assert none["redelivered"] == []  # they failed for good about a day and a half ago
    one = run_json(dev, "admin", "webhooks", "redeliver", "--endpoint", endpoint.id, "--delivery", first)
    assert one == {"endpoint_id": endpoint.id, "endpoint_status": "enabled", "redelivered": [first]}
    again = run(dev, "admin", "webhooks", "redeliver", "--endpoint", endpoint.id, "--delivery", first, "--json",
                ok=False)  # fmt: skip
    assert again.returncode == 1 and "is pending" in json.loads(again.stderr)["error"]
    bad = run(dev, "admin", "webhooks", "redeliver", "--endpoint", endpoint.id, "--since", "yesterday", ok=False)
    assert bad.returncode == 2 and "24h" in bad.stderr
    run_json(dev, "admin", "webhooks", "disable", "--endpoint", endpoint.id)
    rest = run(dev, "admin", "webhooks", "redeliver", "--endpoint", endpoint.id, "--since", "2026-01-01").stdout
    assert "1 deliveries queued for redelivery (the endpoint is disabled" in rest and second in rest
    history = run_json(dev, "admin", "webhooks", "deliveries", "--endpoint", endpoint.id)["deliveries"]
    assert {d["status"] for d in history} == {"pending"} and {d["attempt"] for d in history} == {6}
