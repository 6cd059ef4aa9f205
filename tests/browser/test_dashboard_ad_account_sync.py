"""Sync now on the demo's sandbox ad account, in Debian's chromium against FloKit under gunicorn,
with the Dagster side run for real in the test process: the click writes a pending request, the
sensor (evaluated on an ephemeral instance) launches `ad_accounts_sync_job` for it, the run fills
the registry, and the page, polling every 5 s, shows the request succeeded with its counts; the
registry then lists the objects, the sandbox label still there. axe and screenshots at 1280 and
390 px on the way."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from cli.demo import SANDBOX_NAME, connect_sandbox
from orchestration.adaccounts.jobs import ad_accounts_sync_job
from orchestration.adaccounts.sensors import SYNC_REQUESTS
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from tests.browser.support import assert_accessible, press_sign_in, shoot
from tests.support.adaccounts import spend
from warehouse.adaccounts import sync_requests as requests
from warehouse.dashboard import sessions
from warehouse.db import Database
from warehouse.settings import INSTANCE_KEY_FILE, Settings

OPERATOR = "maya@example.com"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """The instance key in the data directory's key file: gunicorn's workers and the Dagster run
    read it there (the run unseals the sandbox's config with it)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(32)
    (data_dir / INSTANCE_KEY_FILE).write_text(key)
    return Settings(data_dir=data_dir, database_url=database_url, instance_key=key)


def expect() -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def accessible_at_both_widths(page: Any) -> None:
    assert_accessible(page)
    page.set_viewport_size({"width": 390, "height": 800})
    try:
        assert_accessible(page)
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def daemon_tick(settings: Settings) -> str:
    """What `dagster-daemon` does for a pending request: the sensor's tick, then the run it asked
    for (in process, on an ephemeral instance), in a thread of its own, as the daemon is a process
    of its own (Playwright's sync API keeps an event loop on this thread). Returns the run's id."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(_tick_and_run, settings).result(timeout=120)


def _tick_and_run(settings: Settings) -> str:
    database = DatabaseResource(url=settings.database_url)
    with dg.DagsterInstance.ephemeral() as instance:
        sensor = SYNC_REQUESTS.request_sensor(5)
        result = sensor(dg.build_sensor_context(instance=instance, resources={"database": database}))
        assert isinstance(result, dg.SensorResult)
        [launch] = result.run_requests or []
        run = ad_accounts_sync_job.execute_in_process(
            instance=instance,
            run_config=launch.run_config,
            tags=launch.tags,
            resources={
                "database": database,
                "data_dir": DataDirResource(root=str(settings.data_dir)),
                "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
            },
        )
        assert run.success
        return run.run_id


def test_sync_now_on_the_demo_sandbox_runs_through_dagster_and_shows_the_outcome(
    page: Any, flokit_server: Any, settings: Settings, db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    today = datetime.now(UTC).date()
    campaigns = ("meta_broad", "google_uac", "tiktok_spark")
    days = [today - timedelta(days=d) for d in range(5)]
    spend(settings.paths.lake(), ws, [(day, c, f"{c}_cr1", 100.0) for day in days for c in campaigns])
    assert settings.instance_key
    account_id = connect_sandbox(db, ws, settings.instance_key)
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=OPERATOR, workspace_id=ws)
    press_sign_in(page, f"{flokit_server.base}/dashboard/login?token={token}")
    page.get_by_role("link", name="Integrations").click()
    page.wait_for_load_state()  # the next click would otherwise abort this page's scripts
    page.get_by_role("link", name=SANDBOX_NAME).click()
    page.wait_for_load_state("networkidle")

    status = page.locator("#ad-sync-status")
    expect()(status).to_contain_text("Latest sync request none yet")
    expect()(page.locator("main")).to_contain_text("No objects yet")
    assert status.get_attribute("hx-trigger") is None  # idle: no polling
    page.get_by_role("button", name="Sync now").click()
    dialog = page.locator("dialog#dialog-ad-sync")
    expect()(dialog).to_be_visible()
    expect()(dialog).to_contain_text("reads every campaign, ad set or ad group and ad of the account")
    expect()(dialog).to_contain_text("This is a sandbox")
    assert_accessible(page)
    shoot(page, "integrations-ad-account-sync-dialog")
    dialog.get_by_role("button", name="Sync now").click()

    expect()(dialog).to_be_hidden()
    expect()(status.locator("#latest-sync")).to_have_text("pending")
    expect()(page.locator("#toasts")).to_contain_text("Sync requested")
    expect()(status).to_contain_text(f"requested by {OPERATOR}")
    expect()(status).to_contain_text("requested just now")
    expect()(status).to_have_attribute("hx-trigger", "every 5s")
    expect()(status).to_be_focused()
    with db.read() as conn:
        [asked] = requests.recent_requests(conn, ad_account_id=account_id)
    assert (asked.status, asked.requested_by) == ("pending", OPERATOR)
    shoot(page, "integrations-ad-account-sync-pending")

    run_id = daemon_tick(settings)

    expect()(status.locator("#latest-sync")).to_have_text("succeeded", timeout=8000)
    expect()(status).to_contain_text("6 object(s) listed, 6 new, 0 changed, 0 unchanged, 0 no longer listed")
    expect()(status).to_contain_text("3 campaign(s) and 3 creative(s) mapped to report labels")
    expect()(status).not_to_have_attribute("hx-trigger", "every 5s")
    with db.read() as conn:
        ended = requests.get_request(conn, request_id=asked.id)
    assert (ended.status, ended.run_id) == ("succeeded", run_id)

    status.get_by_role("link", name="Show the registry as synced").click()
    page.wait_for_load_state("networkidle")
    registry = page.get_by_role("region", name="Registry")
    for name in ("meta_broad", "google_uac", "tiktok_spark", "meta_broad_cr1"):
        expect()(registry).to_contain_text(name)
    expect()(page.locator(".sandbox-note")).to_contain_text("no ad platform is called")
    expect()(page.get_by_role("region", name="Sync requests")).to_contain_text(f"{asked.id} {OPERATOR} succeeded")
    accessible_at_both_widths(page)
    shoot(page, "integrations-ad-account-synced")
