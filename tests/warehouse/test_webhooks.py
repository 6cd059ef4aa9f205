"""Webhook state: the outbox in the caller's transaction, endpoints, URL rules, secrets."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from clients.dns import validate_url
from tests.support import WEBHOOK_KEY
from transforms.webhooks.urls import InvalidUrl
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow
from warehouse.errors import NotFound
from warehouse.settings import Settings, SettingsError
from warehouse.webhooks import deliveries, endpoints
from warehouse.webhooks.outbox import emit_event
from warehouse.webhooks.tables import webhook_deliveries, webhook_events


def add(db: Database, workspace: dict, events: list[str]) -> str:
    with db.write() as conn:
        endpoint, secret = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="http://127.0.0.1:9/x",
            events=events,
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    assert secret.startswith("whsec_")
    return endpoint.id


def test_emit_freezes_once_and_queues_one_delivery_per_subscribed_endpoint(db: Database, workspace: dict) -> None:
    """A disabled endpoint's delivery is queued too, and waits unclaimed until it is enabled."""
    a = add(db, workspace, ["action.approved"])
    b = add(db, workspace, ["action.approved", "integration.error"])
    add(db, workspace, ["integration.error"])
    off = add(db, workspace, ["action.approved"])
    with db.write() as conn:
        endpoints.set_enabled(conn, endpoint_id=off, enabled=False)
        event_id = emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.approved", data={"x": 1})
    with db.read() as conn:
        event = conn.execute(webhook_events.select()).one()
        queued = conn.execute(sa.select(webhook_deliveries.c.endpoint_id, webhook_deliveries.c.status)).all()
    assert json.loads(event.body)["id"] == event_id == event.id
    assert sorted(queued) == sorted([(a, "pending"), (b, "pending"), (off, "pending")])
    lease = timedelta(seconds=20)
    with db.write() as conn:
        claimed = deliveries.claim(conn, now=utcnow(), limit=10, lease=lease, instance_key=WEBHOOK_KEY)
        assert sorted(c.endpoint_id for c in claimed) == sorted([a, b])
        endpoints.set_enabled(conn, endpoint_id=off, enabled=True)
        assert [
            c.endpoint_id for c in deliveries.claim(conn, now=utcnow(), limit=10, lease=lease, instance_key=WEBHOOK_KEY)
        ] == [off]


def test_emit_belongs_to_the_callers_transaction(db: Database, workspace: dict) -> None:
    add(db, workspace, ["action.approved"])

    def transition_that_fails() -> None:
        with db.write() as conn:
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.approved", data={})
            raise RuntimeError("the action transition failed")

    with pytest.raises(RuntimeError):
        transition_that_fails()
    with db.read() as conn:
        assert conn.execute(webhook_events.select()).first() is None
        assert conn.execute(webhook_deliveries.select()).first() is None


def test_endpoint_rules(db: Database, workspace: dict) -> None:
    with db.write() as conn, pytest.raises(ValueError, match="unknown event type"):
        endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="https://8.8.8.8/",
            events=["nope"],
            allow_private=False,
            instance_key=WEBHOOK_KEY,
        )
    with db.write() as conn, pytest.raises(NotFound):
        endpoints.create_endpoint(
            conn,
            workspace_id="ws_missing",
            url="https://8.8.8.8/",
            events=["action.created"],
            allow_private=False,
            instance_key=WEBHOOK_KEY,
        )
    with db.write() as conn:
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=workspace["workspace_id"],
            url="https://8.8.8.8/hooks",
            events=["action.created", "action.created", "integration.error"],
            allow_private=False,
            instance_key=WEBHOOK_KEY,
            standard_webhooks=True,
        )
    assert endpoint.events == ("action.created", "integration.error") and endpoint.standard_webhooks
    assert endpoint.status == "enabled"


def test_rotation_keeps_two_secrets_for_24_hours(db: Database, workspace: dict) -> None:
    endpoint_id = add(db, workspace, ["action.created"])
    now = utcnow()
    with db.read() as conn:
        [first] = endpoints.signing_secrets(conn, [endpoint_id], now, instance_key=WEBHOOK_KEY)[endpoint_id]
    with db.write() as conn:
        second, expires = endpoints.rotate_secret(conn, endpoint_id=endpoint_id, instance_key=WEBHOOK_KEY, now=now)
    assert expires == now + timedelta(hours=24)
    with db.read() as conn:
        assert endpoints.signing_secrets(conn, [endpoint_id], now, instance_key=WEBHOOK_KEY)[endpoint_id] == [
            second,
            first,
        ]
        assert endpoints.signing_secrets(conn, [endpoint_id], expires - timedelta(seconds=1), instance_key=WEBHOOK_KEY)[
            endpoint_id
        ] == [
            second,
            first,
        ]
        assert endpoints.signing_secrets(conn, [endpoint_id], expires, instance_key=WEBHOOK_KEY)[endpoint_id] == [
            second
        ]
    with db.write() as conn:  # rotating again within the overlap drops the oldest: never 3 signers
        third, _ = endpoints.rotate_secret(conn, endpoint_id=endpoint_id, instance_key=WEBHOOK_KEY, now=now)
    with db.read() as conn:
        assert endpoints.signing_secrets(conn, [endpoint_id], now, instance_key=WEBHOOK_KEY)[endpoint_id] == [
            third,
            second,
        ]


@pytest.mark.parametrize(
    ("url", "allow_private", "error"),
    [
        ("https://8.8.8.8/hook", False, None),
        ("https://[2001:4860:4860::8888]/hook", False, None),
        ("http://8.8.8.8/hook", False, "must use https"),
        ("https://127.0.0.1/hook", False, "non-public"),
        ("https://10.1.2.3/hook", False, "non-public"),
        ("https://192.168.0.1/hook", False, "non-public"),
        ("https://169.254.169.254/latest", False, "non-public"),
        ("https://[::1]/hook", False, "non-public"),
        ("https://localhost/hook", False, "non-public"),
        ("https://user:pw@8.8.8.8/hook", False, "credentials"),
        ("https:///nohost", False, "no host"),
        ("ftp://8.8.8.8/", True, "must use https or http"),
        ("http://127.0.0.1:8080/hook", True, None),
        ("https://10.1.2.3/hook", True, None),
    ],
)
def test_url_rules(url: str, allow_private: bool, error: str | None) -> None:
    if error is None:
        assert validate_url(url, allow_private=allow_private) == url
    else:
        with pytest.raises(InvalidUrl, match=error):
            validate_url(url, allow_private=allow_private)


def test_webhook_settings(tmp_path: Path) -> None:
    base = {"FLOKIT_DATA_DIR": str(tmp_path)}
    s = Settings.from_env(base)
    assert (s.webhooks_allow_private, s.webhook_backoff_scale, s.sensor_interval_s) == (False, 1.0, 5)
    s = Settings.from_env(
        {
            **base,
            "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1",
            "FLOKIT_WEBHOOK_BACKOFF_SCALE": "0.001",
            "FLOKIT_SENSOR_INTERVAL_S": "1",
        }
    )
    assert (s.webhooks_allow_private, s.webhook_backoff_scale, s.sensor_interval_s) == (True, 0.001, 1)
    assert Settings.from_env(s.child_env()) == s
    for name, bad in [
        ("FLOKIT_WEBHOOKS_ALLOW_PRIVATE", "maybe"),
        ("FLOKIT_WEBHOOK_BACKOFF_SCALE", "-1"),
        ("FLOKIT_WEBHOOK_BACKOFF_SCALE", "nan"),
        ("FLOKIT_SENSOR_INTERVAL_S", "0"),
    ]:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env({**base, name: bad})


def test_an_endpoint_is_read_only_within_its_workspace(db: Database, workspace: dict) -> None:
    """The query itself filters on the workspace: another workspace's id is NotFound, as an unknown one."""
    mine = add(db, workspace, ["action.approved"])
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")["workspace_id"]
    with db.read() as conn:
        assert endpoints.get_endpoint(conn, workspace_id=workspace["workspace_id"], endpoint_id=mine).id == mine
        with pytest.raises(NotFound, match=f"No webhook endpoint {mine}"):
            endpoints.get_endpoint(conn, workspace_id=other, endpoint_id=mine)
        with pytest.raises(NotFound):
            endpoints.get_endpoint(conn, workspace_id=workspace["workspace_id"], endpoint_id="whe_missing")
        # The operator's commands see every workspace's endpoints.
        assert endpoints.endpoint_for_operator(conn, mine).workspace_id == workspace["workspace_id"]
