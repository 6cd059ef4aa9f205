"""What the provider notification tests share: an instance key (integration and app secrets are
sealed under it), connecting an integration as `flokit admin integrations connect` does, and
reading what a user of the app would see (the entitlement answer) and what landed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.entitlements.tables import store_notifications
from warehouse.events.tables import landed_events
from warehouse.integrations import repository as repo
from warehouse.settings import Settings

KEY = "n" * 43  # the instance key of these tests


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=KEY)


def connect(db: Database, workspace_id: str, integration_type: str, raw: dict[str, Any]) -> str:
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type=integration_type,
            config=validate_config(integration_type, raw),
            instance_key=KEY,
            actor="ops@example.com",
        ).id


def entitlement(client: FlaskClient, workspace: dict[str, Any], user: str) -> Any:
    """What the app reads for the user (`GET /api/paywall/entitlement`)."""
    r = client.get("/api/paywall/entitlement", headers={"x-user-id": user, "x-app-key": workspace["app_key"]})
    assert r.status_code == 200, r.data
    return r.json


def landed(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(landed_events).order_by(landed_events.c.seq))]


def stored_count(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(store_notifications)).scalar_one())
