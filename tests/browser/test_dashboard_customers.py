"""The Customers pages in a real browser, against FloKit under gunicorn (issue 34).

A support agent's ticket: a customer whose web subscription lapsed writes in. The purchase arrives
as in production (a signed generic-subscription webhook over HTTP, to the same gunicorn); the agent
finds the customer by the purchase id, grants a month of promotional access through the dialog,
and the app's own read (`GET /api/paywall/entitlement`, asked of the same server) answers it
active and promotional at once; the grant is on the timeline with the agent's email; a refused
field is explained beside it; End takes the access away again. Every page is checked with axe,
at 1280 and 390 px (no table cut off at either width, the document no wider than a phone), and shot.
"""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests

from tests.browser.demo_world import OPERATOR, check_at_phone_width, settle, sign_in
from tests.browser.support import PageGuard, assert_accessible, shoot
from tests.support import GunicornServer
from tests.support.notifications import SUBSCRIPTION, iso, purchase
from tests.support.provider_notifications import KEY
from transforms.webhooks.signing import service_signature
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.settings import Settings


@pytest.fixture(scope="module")
def module_settings(module_settings: Settings) -> Settings:
    """The module's one database (each test works in a workspace of its own), with the instance
    key the generic webhook's secret is sealed with, which the server unseals it with."""
    return dataclasses.replace(module_settings, instance_key=KEY)


@pytest.fixture
def settings(module_settings: Settings) -> Settings:
    return module_settings


@pytest.fixture
def flokit_server(module_server: GunicornServer) -> GunicornServer:
    """The module's one gunicorn, on `module_settings`."""
    return module_server


def lapsed_web_subscriber(server: GunicornServer, db: Database, name: str) -> dict[str, Any]:
    """A workspace whose customer `user-7` bought `sub_9` (9.99 EUR) 35 days ago; it expired 5 days ago."""
    with db.write() as conn:
        workspace = bootstrap(conn, name=name)
        secret = set_stores(
            conn, app_id=workspace["app_id"], update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert secret is not None
    now = datetime.now(UTC)
    body = json.dumps(
        purchase(occurred_at=iso(now - timedelta(days=35)), expires_at=iso(now - timedelta(days=5)))
    ).encode()
    answer = requests.post(
        f"{server.base}{SUBSCRIPTION}?app={workspace['app_id']}",
        data=body,
        headers={
            "Service-Signature": service_signature(body, [secret], int(time.time() * 1000)),
            "Content-Type": "application/json",
        },
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return workspace


def entitlement(server: GunicornServer, workspace: dict[str, Any], user: str) -> dict[str, Any]:
    """What the app reads for the user, from the same server."""
    r = requests.get(
        f"{server.base}/api/paywall/entitlement",
        headers={"x-user-id": user, "x-app-key": workspace["app_key"]},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def test_find_a_lapsed_customer_grant_a_month_then_end_it(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, db: Database
) -> None:
    from playwright.sync_api import expect

    workspace = lapsed_web_subscriber(flokit_server, db, "Support Co")
    assert entitlement(flokit_server, workspace, "user-7")["active"] is False
    sign_in(page, flokit_server, db, workspace["workspace_id"])

    page.get_by_role("link", name="Customers").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Customers")
    assert_accessible(page)
    shoot(page, "customers-search")

    # An empty search is explained beside the field (a 400, which chromium logs: expected).
    guard = browser_context[1]
    guard.expect_console_error("status of 400")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#customer-query-error")).to_have_text("Query must not be empty.")
    expect(page.get_by_label("Id")).to_have_attribute("aria-invalid", "true")
    assert_accessible(page)

    # The purchase id from the ticket: one customer, so straight to their page.
    page.get_by_label("Id").fill("sub_9")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Customer user-7")
    settle(page)
    expect(page.locator("#customer-facts")).to_contain_text(workspace["app_id"])
    purchase_card = page.locator("#purchase-1")
    expect(purchase_card).to_contain_text("expired")
    expect(purchase_card).to_contain_text("9.99 EUR")
    expect(page.locator("#entitlements tbody tr")).to_have_count(1)
    expect(page.locator("#entitlements")).to_contain_text("inactive")
    expect(page.locator("#entitlements button", has_text="End")).to_have_count(0)  # a store's grant
    expect(page.locator("#timeline")).to_contain_text("generic notification applied")
    assert_accessible(page)
    check_at_phone_width(page, "customer")
    shoot(page, "customers-customer")

    # Grant a month through the dialog.
    page.get_by_role("button", name="Grant promotional access").click()
    dialog = page.locator("dialog#dialog-grant")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Product id")).to_be_focused()
    assert_accessible(page)
    shoot(page, "customers-grant-dialog")
    dialog.get_by_label("Product id").fill("pro_monthly")
    dialog.get_by_label("or for (ISO 8601 duration)").fill("P1M")
    dialog.get_by_label("Reason (kept in the audit log)").fill("ticket 42: paid, renewal failed")
    # A grant is not idempotent: a second submit of the form while the first answer loads (an
    # impatient double click on a slow network) is dropped by customers.js. Synthetic submit
    # events run its handler without sending anything.
    dropped = page.evaluate(
        """() => {
             const form = document.querySelector('#form-grant');
             const first = new Event('submit', {bubbles: true, cancelable: true});
             const second = new Event('submit', {bubbles: true, cancelable: true});
             form.dispatchEvent(first);
             form.dispatchEvent(second);
             form.removeAttribute('data-sent');
             return [first.defaultPrevented, second.defaultPrevented];
           }"""
    )
    assert dropped == [False, True]
    dialog.get_by_role("button", name="Grant access").click()

    expect(page.locator("p.notice-ok")).to_contain_text("Promotional access granted")
    promo = page.locator("#entitlements tbody tr", has_text="promotional")
    expect(promo).to_have_count(1)
    expect(promo).to_contain_text("active")
    expect(promo.get_by_role("button", name="End")).to_be_visible()
    newest = page.locator("#timeline tbody tr").first
    expect(newest).to_contain_text("promotional access to pro_monthly granted until")
    expect(newest).to_contain_text(f"by {OPERATOR}: ticket 42: paid, renewal failed")
    assert entitlement(flokit_server, workspace, "user-7") == {"active": True, "source": "promotional"}
    assert_accessible(page)
    shoot(page, "customers-granted")

    # A second grant with no reason: refused beside the field (400), the form open on the page.
    guard.expect_console_error("status of 400")
    page.get_by_role("button", name="Grant promotional access").click()
    dialog.get_by_label("Product id").fill("gold")
    dialog.get_by_label("or for (ISO 8601 duration)").fill("P7D")
    dialog.get_by_role("button", name="Grant access").click()
    form = page.locator("section.confirm #form-grant")
    expect(form).to_be_visible()
    expect(page.locator("#grant-reason-error")).to_have_text("Give a reason: it is kept in the audit log.")
    expect(form.get_by_label("Product id")).to_have_value("gold")
    assert_accessible(page)
    check_at_phone_width(page, "grant refused")
    shoot(page, "customers-grant-refused")
    form.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Customer user-7")
    settle(page)

    # End it: access goes at once.
    promo.get_by_role("button", name="End").click()
    end = page.locator("dialog[id^=dialog-end-]")
    expect(end).to_be_visible()
    expect(end.get_by_role("button", name="Cancel")).to_be_focused()  # destructive: Cancel first
    end.get_by_label("Reason (optional, kept in the audit log)").fill("card fixed")
    end.get_by_role("button", name="End access").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Promotional access ended")
    expect(page.locator("#entitlements tbody tr", has_text="promotional")).to_contain_text("inactive")
    expect(page.locator("#timeline tbody tr").first).to_contain_text(
        f"promotional access to pro_monthly ended by {OPERATOR}: card fixed"
    )
    assert entitlement(flokit_server, workspace, "user-7")["active"] is False
    settle(page)
