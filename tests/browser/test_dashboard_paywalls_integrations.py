"""The Paywalls and Integrations pages in Debian's chromium, against FloKit under gunicorn.

The flows the issue names: publish a paywall version in the browser, then the gateway serves it
(`GET /api/paywall/config`, which takes the user's id and no key: the spec says `x-app-key` is
not needed for config); Sync now shows the queued status and polls. Every page passes axe and is
shot at 1280 and 390 px, populated and empty.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from tests.browser.support import PageGuard, assert_accessible, expect, press_sign_in, shoot
from tests.support import GunicornServer
from tests.support.engine import WORLD, connect_registry
from tests.support.integrations import KEY, connect
from tests.support.paywalls import document, offer
from transforms import paywall
from warehouse.dashboard import sessions
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.integrations.tables import integration_syncs
from warehouse.integrations.target import SPEND_ROWS
from warehouse.paywalls import configs
from warehouse.settings import Settings

OPERATOR = "maya@example.com"


@pytest.fixture
def settings(module_settings: Settings) -> Settings:
    """The module's one database (tests/browser/conftest.py): each test works in a workspace of its own."""
    return module_settings


@pytest.fixture
def flokit_server(module_server: GunicornServer) -> GunicornServer:
    """The module's one gunicorn, on `module_settings`."""
    return module_server


def accessible_at_both_widths(page: Any) -> None:
    """axe at 1280 px and at 390 px, where the tables scroll inside their (focusable) wrappers."""
    assert_accessible(page)
    page.set_viewport_size({"width": 390, "height": 800})
    try:
        assert_accessible(page)
    finally:
        page.set_viewport_size({"width": 1280, "height": 800})


def sign_in(page: Any, base: str, db: Database, workspace_id: str) -> None:
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=OPERATOR, workspace_id=workspace_id)
    press_sign_in(page, f"{base}/dashboard/login?token={token}")


def gateway_config(base: str, app_id: str, paywall_id: str) -> dict[str, Any]:
    answer = requests.get(
        f"{base}/api/paywall/config",
        params={"app_id": app_id, "paywall_id": paywall_id},
        headers={"x-user-id": "user-42"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def publish(db: Database, app_id: str, raw: dict[str, Any], actor: str, paywall_id: str = "onboarding") -> None:
    with db.write() as conn:
        configs.publish(conn, app_id=app_id, paywall_id=paywall_id, document=paywall.parse_document(raw), actor=actor)


def two_offers(active: bool = False) -> dict[str, Any]:
    raw = document([1], active).model_dump(mode="json", exclude_none=True)
    raw["variants"][0]["offers"].append(offer("pro_yearly") | {"name": "Pro yearly", "price_usd_cents": 4999})
    raw["variants"][0]["cta_copy"] = "Start free trial"
    return raw


def populate(db: Database, workspace: dict) -> dict[str, str]:
    """A workspace with two paywall versions, an integration with a failed and a good sync, and
    the sandbox registry."""
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    publish(db, app_id, two_offers(), "ops@example.com")
    publish(db, app_id, document([30, 70]).model_dump(mode="json", exclude_none=True), "ops@example.com")
    integration_id = connect(db, ws)
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id, trigger="scheduled")
        repo.start_sync(conn, sync_id=sync.id, run_id="run-1", instance_key=KEY)
        repo.finish_failure(
            conn, sync_id=sync.id, code="auth", message="Adjust answered 401: invalid API token", refused=True
        )
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id, trigger="scheduled")
        repo.start_sync(conn, sync_id=sync.id, run_id="run-2", instance_key=KEY)
        # What a spend sync that wrote 42 rows leaves behind (warehouse/integrations/target.py): the
        # rows it holds per day, so sync_stats' total and last 24 h agree as they do in production.
        yesterday = datetime.now(UTC).date() - timedelta(days=1)
        first = datetime(yesterday.year, yesterday.month, yesterday.day, tzinfo=UTC)
        repo.finish_success(
            conn, sync_id=sync.id, records=42, earliest=first, state={SPEND_ROWS: {yesterday.isoformat(): 42}}
        )
    account_id = connect_registry(db, ws, WORLD)
    return {"integration_id": integration_id, "account_id": account_id}


def test_publish_a_paywall_version_then_the_gateway_serves_it(
    page: Any, flokit_server: Any, db: Database, workspace: dict
) -> None:
    base, app_id = flokit_server.base, workspace["app_id"]
    publish(db, app_id, document([50, 50]).model_dump(mode="json", exclude_none=True), "ops@example.com")
    assert gateway_config(base, app_id, "onboarding")["version"] == 1
    sign_in(page, base, db, workspace["workspace_id"])
    page.get_by_role("link", name="Paywalls").click()
    page.wait_for_load_state()  # the next click would otherwise abort this page's scripts
    page.get_by_role("link", name="onboarding").click()
    expect(page.locator("#weight-sum")).to_have_text("Weights sum to 100: v0 50.0 %, v1 50.0 %.")

    proposed = document([25, 75]).model_dump(mode="json", exclude_none=True)
    proposed["variants"][1]["cta_copy"] = "Try it free"
    page.locator("#paywall-document").fill(json.dumps(proposed, indent=2))
    expect(page.locator("#weight-sum")).to_have_text("Weights sum to 100: v0 25.0 %, v1 75.0 %.")
    page.get_by_role("button", name="Review changes").click()

    dialog = page.locator("dialog#dialog-publish")
    expect(dialog).to_be_visible()
    changes = dialog.locator("#publish-changes")
    expect(changes).to_contain_text("variant v0: traffic_weight 50.0 → 25.0")
    expect(changes).to_contain_text("variant v1: cta_copy null → Try it free")
    expect(changes).to_contain_text("variant v1: share of traffic 50.0% → 75.0%")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    assert_accessible(page)
    shoot(page, "paywalls-review-dialog")
    # Esc closes it and puts focus back on the button that opened it; nothing is published
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Review changes")).to_be_focused()
    page.get_by_role("button", name="Review changes").click()
    dialog.get_by_role("button", name="Publish version 2").click()

    expect(page.locator(".success")).to_contain_text("Version 2 published and live")
    expect(page.locator("#version-2")).to_contain_text(OPERATOR)
    deadline = time.monotonic() + 10  # each gateway worker keeps an answer for a second
    while (served := gateway_config(base, app_id, "onboarding"))["version"] != 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert served["version"] == 2 and served["fallbackUsed"] is False
    variants = {v["variant_id"]: v for v in proposed["variants"]}
    assert served["variant"]["traffic_weight"] == variants[served["variant"]["variant_id"]]["traffic_weight"]
    with db.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id="onboarding")
    assert live is not None and live.published_by == OPERATOR


def test_an_invalid_document_is_explained_beside_the_field(
    browser_context: tuple[Any, PageGuard], flokit_server: Any, db: Database, workspace: dict
) -> None:
    """Unguarded context: the refusal is an HTTP 400, which chromium logs as a console error."""
    context, guard = browser_context
    page = context.new_page()
    base, app_id = flokit_server.base, workspace["app_id"]
    sign_in(page, base, db, workspace["workspace_id"])
    page.goto(f"{base}/dashboard/paywalls/{app_id}/onboarding")
    raw = {
        "experiment_active": True,
        "variants": [{"variant_id": "a", "layout": "x", "offers": [], "traffic_weight": 0}],
    }
    page.locator("#paywall-document").fill(json.dumps(raw))
    expect(page.locator("#weight-sum")).to_have_text(
        "Weights sum to 0: an active experiment needs a variant with a weight above 0."
    )
    page.get_by_role("button", name="Review changes").click()
    area = page.locator("#paywall-document")
    expect(area).to_have_attribute("aria-invalid", "true")
    expect(area).to_be_focused()
    expect(page.locator("#paywall-document-error")).to_contain_text("variants.0.offers")
    expect(page.locator("dialog#dialog-publish")).to_be_hidden()
    assert json.loads(area.input_value()) == raw
    assert all("400" in p for p in guard.problems), guard.report()
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding") is None


def test_sync_now_shows_the_queued_status_and_polls(
    page: Any, flokit_server: Any, db: Database, workspace: dict
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    sign_in(page, flokit_server.base, db, workspace["workspace_id"])
    page.get_by_role("link", name="Integrations").click()
    page.wait_for_load_state()  # the next click would otherwise abort this page's scripts
    page.get_by_role("link", name=re.compile("attribution_provider_a")).click()
    page.wait_for_load_state()  # its script opens the Sync now dialog: pressed sooner, the button posts
    status = page.locator("#sync-status")
    expect(status).to_contain_text("none pending, none run yet")
    assert status.get_attribute("hx-trigger") is None  # idle: no polling
    page.get_by_role("button", name="Sync now").click()
    dialog = page.locator("dialog#dialog-sync")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("A manual sync is queued")
    dialog.get_by_role("button", name="Sync now").click()
    expect(dialog).to_be_hidden()
    expect(status.locator("#pending-sync")).to_have_text("queued")
    expect(status).to_contain_text("queued just now")
    expect(page.locator("#toasts")).to_contain_text("Sync queued")
    expect(status).to_have_attribute("hx-trigger", "every 5s")
    expect(status).to_be_focused()
    with db.read() as conn:
        rows = conn.execute(integration_syncs.select()).all()
    assert [(r.integration_id, r.trigger, r.status) for r in rows] == [(integration_id, "manual", "queued")]
    # the daemon takes it: the next poll shows it running, then done, and polling stops
    with db.write() as conn:
        repo.start_sync(conn, sync_id=rows[0].id, run_id="run-1", instance_key=KEY)
    expect(status).to_contain_text("running since", timeout=8000)
    with db.write() as conn:
        repo.finish_success(conn, sync_id=rows[0].id, records=3, earliest=None, state={})
    expect(status).to_contain_text("succeeded", timeout=8000)
    expect(status).not_to_have_attribute("hx-trigger", "every 5s")


def test_every_page_is_accessible_and_shot_populated(
    page: Any, flokit_server: Any, db: Database, workspace: dict
) -> None:
    made = populate(db, workspace)
    base, app_id = flokit_server.base, workspace["app_id"]
    sign_in(page, base, db, workspace["workspace_id"])
    for path, name in (
        ("/dashboard/paywalls", "paywalls-list"),
        (f"/dashboard/paywalls/{app_id}/onboarding", "paywalls-detail"),
        ("/dashboard/integrations", "integrations-list"),
        (f"/dashboard/integrations/{made['integration_id']}", "integrations-detail"),
        (f"/dashboard/integrations/{made['integration_id']}/sync", "integrations-sync-confirm"),
        (f"/dashboard/ad-accounts/{made['account_id']}", "integrations-ad-account"),
        (f"/dashboard/ad-accounts/{made['account_id']}/sync", "integrations-ad-account-sync-confirm"),
    ):
        page.goto(base + path)
        accessible_at_both_widths(page)
        shoot(page, name)
    # The spend sync's 42 rows, counted once in sync_stats: held now and arrived in the last 24 h.
    page.goto(f"{base}/dashboard/integrations/{made['integration_id']}")
    expect(page.locator("dt:has-text('spend rows, total') + dd")).to_have_text("42")
    expect(page.locator("dt:has-text('Last 24 h') + dd")).to_have_text("42")


def test_every_page_is_accessible_and_shot_empty(page: Any, flokit_server: Any, db: Database, workspace: dict) -> None:
    base, app_id = flokit_server.base, workspace["app_id"]
    sign_in(page, base, db, workspace["workspace_id"])
    for path, name, says in (
        ("/dashboard/paywalls", "paywalls-list-empty", "No paywall published yet"),
        (f"/dashboard/paywalls/{app_id}/onboarding", "paywalls-detail-empty", "not published"),
        ("/dashboard/integrations", "integrations-list-empty", "No integration connected"),
    ):
        page.goto(base + path)
        expect(page.locator("main")).to_contain_text(says)
        accessible_at_both_widths(page)
        shoot(page, name)
