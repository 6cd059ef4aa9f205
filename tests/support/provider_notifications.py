"""What the provider notification tests share: an instance key (integration and app secrets are
sealed under it), connecting an integration as `flokit admin integrations connect` does, and
reading what a user of the app would see (the entitlement answer) and what landed."""

from __future__ import annotations

import asyncio
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support import free_port
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


_LOCALSTRIPE: list[str] = []


def localstripe() -> str:
    """The address of localstripe (a Stripe API fake speaking Stripe's shapes) served in-process
    on 127.0.0.1, its store emptied. One server per test process: aiohttp ties localstripe's
    module-level app to the loop that first ran it. Served here rather than by its CLI, which
    binds every interface, and with its store kept in memory (it pickles it to /tmp on writes)."""
    from localstripe import resources

    if not _LOCALSTRIPE:
        _LOCALSTRIPE.append(_start_localstripe())
    resources.store.clear()
    return _LOCALSTRIPE[0]


def _start_localstripe() -> str:
    from aiohttp import web

    with warnings.catch_warnings():  # localstripe registers plain functions as aiohttp handlers
        warnings.simplefilter("ignore", DeprecationWarning)
        from localstripe import resources, server

    resources.store.dump_to_disk = lambda: None  # type: ignore[method-assign]
    port = free_port()
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(server.app)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        started.set()
        loop.run_forever()

    threading.Thread(target=serve, daemon=True, name="localstripe").start()
    assert started.wait(10), "localstripe did not start"
    return f"http://127.0.0.1:{port}"
