"""`flokit admin notifications replay` as an operator runs it: the stored raw notifications
rebuild what they had applied, and replaying twice changes nothing more."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from api.app import create_app
from tests.e2e import test_integrations_cli as cli
from tests.support.notifications import SUBSCRIPTION, iso, post, purchase
from warehouse.db import database_for
from warehouse.entitlements import ledger
from warehouse.entitlements.tables import entitlement_grants
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e
env = cli.env  # the fixture: a migrated database and an instance key
flokit = cli.flokit


def test_replay_rebuilds_the_ledger_from_stored_notifications(env: dict[str, str], tmp_path: Path) -> None:
    boot = json.loads(flokit(env, "admin", "bootstrap", "--name", "Acme", "--json").stdout)
    made = flokit(env, "admin", "apps", "stores", "--app", boot["app_id"], "--new-generic-secret", "--json")
    assert made.returncode == 0, made.stderr
    secret = json.loads(made.stdout)["generic_secret"]
    since = datetime.now(UTC) - timedelta(seconds=1)
    settings = replace(Settings.from_env(env), surfaces=("gateway",))
    client = create_app(settings).test_client()
    for n, user in enumerate(("ana", "ben")):
        body: dict[str, Any] = purchase(id=f"evt_{n}", user_id=user, purchase_id=f"sub_{n}")
        answer = post(client, SUBSCRIPTION, boot["app_id"], body, secret)
        assert answer.status_code == 200 and answer.json["status"] == "applied", answer.json

    db = database_for(env["FLOKIT_DATABASE_URL"])  # the cached engine, closed by the fixture

    def active(user: str) -> bool:
        with db.read() as conn:
            return ledger.current(conn, workspace_id=boot["workspace_id"], app_id=boot["app_id"], user_id=user).active

    with db.write() as conn:  # the ledger lost (a restore from an old backup, say)
        conn.execute(sa.delete(entitlement_grants))
    assert not active("ana") and not active("ben")

    for _ in range(2):  # replaying is idempotent
        done = flokit(env, "admin", "notifications", "replay", "--provider", "generic-subscription",
                      "--since", iso(since), "--json")  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) | {"since": None} == {
            "provider": "generic-subscription", "since": None, "applied": 2, "failed": 0, "errors": [],
        }  # fmt: skip
        assert active("ana") and active("ben")
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(entitlement_grants)).scalar() == 2

    later = flokit(env, "admin", "notifications", "replay", "--provider", "generic-subscription",
                   "--since", str(int((datetime.now(UTC) + timedelta(minutes=1)).timestamp())))  # fmt: skip
    assert later.returncode == 0 and later.stdout.startswith("0 applied, 0 failed")
    bad = flokit(env, "admin", "notifications", "replay", "--provider", "generic-subscription", "--since", "soon")
    assert bad.returncode == 1 and "--since must be ISO 8601 or Unix seconds" in bad.stderr
