"""The API keys and Webhooks pages in a real browser, against FloKit under gunicorn.

Rotating a key in the dashboard makes its old secret answer 401 over v1 at once (asked of the
same gunicorn server); an endpoint added in the dashboard receives the test event sent from it,
signed with the secret the dashboard showed. Deliveries are sent by the real drain
(`orchestration.webhooks.drain.drain`, what the Dagster sensor's job runs), called in-process
here as tests/orchestration/test_webhook_payloads.py does, with a real HTTP receiver on
127.0.0.1 (the instance allows private addresses: FLOKIT_WEBHOOKS_ALLOW_PRIVATE=1 through the
settings' child environment). Every page is checked with axe and shot at 1280 and 390 px, on a
populated and on an empty workspace.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from tests.browser.demo_world import tables_wider_than_their_wrapper
from tests.browser.support import assert_accessible, press_sign_in, shoot
from tests.support import WEBHOOK_KEY, GunicornServer
from tests.support.webhook_receiver import Receiver, running_receiver
from transforms.webhooks.verify import verify
from warehouse.bootstrap import bootstrap
from warehouse.dashboard import sessions
from warehouse.db import Database
from warehouse.settings import Settings
from warehouse.webhooks import delivery_history, endpoints
from warehouse.webhooks.outbox import emit_event
from warehouse.workspaces import create_workspace, list_keys

OPERATOR = "maya@example.com"
LOG = logging.getLogger("dashboard-webhooks")


@pytest.fixture(scope="module")
def module_settings(module_settings: Settings) -> Settings:
    """The module's one database (each test signs in to a workspace of its own), with private
    webhook addresses allowed (the receiver is on 127.0.0.1) and the instance key the signing
    secrets are sealed with, the one `send_due` unseals them with."""
    return dataclasses.replace(module_settings, webhooks_allow_private=True, instance_key=WEBHOOK_KEY)


@pytest.fixture
def settings(module_settings: Settings) -> Settings:
    return module_settings


@pytest.fixture
def flokit_server(module_server: GunicornServer) -> GunicornServer:
    """The module's one gunicorn, on `module_settings`."""
    return module_server


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with running_receiver() as r:
        yield r


def sign_in(page: Any, server: GunicornServer, db: Database, workspace_id: str) -> None:
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=OPERATOR, workspace_id=workspace_id)
    press_sign_in(page, f"{server.base}/dashboard/login?token={token}")
    settle(page)


def settle(page: Any) -> None:
    """Wait until the page has fetched everything (the icon comes after `load`): leaving it
    sooner aborts that request, which the page guard rightly reports."""
    page.wait_for_load_state("networkidle")


def v1_status(server: GunicornServer, key: str) -> int:
    return requests.get(f"{server.base}/v1/actions", headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code


def send_due(db: Database) -> None:
    """What the sensor's job does: send every due delivery, over real HTTP."""
    drain(
        db, WebhookQueue(max_workers=2), WebhookHttpClient(allow_private=True, connect_timeout_s=2.0), LOG, WEBHOOK_KEY
    )


def test_rotate_a_key_then_the_old_key_gets_401_over_v1(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    from playwright.sync_api import expect

    with db.read() as conn:
        rw = next(k for k in list_keys(conn, workspace["workspace_id"]) if k.scope == "read_write")
    assert v1_status(flokit_server, workspace["api_key_read_write"]) == 200
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.get_by_role("link", name="API keys").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("API keys")
    row = page.locator(f"tr#key-{rw.id}")
    expect(row).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"))  # last used: the v1 call above
    assert_accessible(page)
    shoot(page, "keys-list")

    row.get_by_role("button", name=f"Rotate key {rw.key_prefix}").click()
    dialog = page.locator(f"dialog#dialog-rotate-{rw.id}")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("the old key answers 401 from that moment")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()  # destructive: Cancel first
    assert_accessible(page)
    dialog.get_by_role("button", name="Rotate").click()

    panel = page.locator("#new-key-panel")
    expect(panel).to_contain_text("won't be shown again")
    new_key = page.locator("#new-key").inner_text().strip()
    panel.get_by_role("button", name="Copy").click()
    expect(page.locator("#new-key-copied")).not_to_be_empty()
    assert_accessible(page)
    shoot(page, "keys-rotated")

    assert v1_status(flokit_server, workspace["api_key_read_write"]) == 401  # at once
    assert v1_status(flokit_server, new_key) == 200

    page.locator(f"#open-revoke-{rw.id}").click()
    revoke = page.locator(f"dialog#dialog-revoke-{rw.id}")
    expect(revoke).to_be_visible()
    revoke.get_by_role("button", name="Revoke").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Key revoked")
    expect(page.locator(f"tr#key-{rw.id}")).to_contain_text("revoked")
    assert v1_status(flokit_server, new_key) == 401


def test_keys_page_of_an_empty_workspace(page: Any, flokit_server: GunicornServer, db: Database) -> None:
    from playwright.sync_api import expect

    with db.write() as conn:
        empty = create_workspace(conn, name="Empty Co")
    sign_in(page, flokit_server, db, empty.id)
    page.goto(f"{flokit_server.base}/dashboard/keys")
    expect(page.get_by_role("heading", name="No API keys yet")).to_be_visible()
    assert_accessible(page)
    shoot(page, "keys-empty")
    page.get_by_label("read and write").check()
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#new-key-panel")).to_contain_text("won't be shown again")
    assert v1_status(flokit_server, page.locator("#new-key").inner_text().strip()) == 200
    shoot(page, "keys-created")

    settle(page)
    page.goto(f"{flokit_server.base}/dashboard/webhooks")
    expect(page.get_by_role("heading", name="No webhook endpoints yet")).to_be_visible()
    assert_accessible(page)
    shoot(page, "webhooks-list-empty")


def test_add_an_endpoint_send_a_test_event_re_enable_and_rotate_its_secret(
    page: Any, flokit_server: GunicornServer, db: Database, receiver: Receiver
) -> None:
    from playwright.sync_api import expect

    with db.write() as conn:
        workspace = bootstrap(conn, name="Hooks Co")
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.get_by_role("link", name="Webhooks").click()

    page.get_by_label("URL").fill(receiver.url + "/hook")
    page.get_by_label("action.approved").check()
    page.get_by_label("integration.error").check()
    page.get_by_role("button", name="Add endpoint").click()

    expect(page.locator("#new-secret-panel")).to_contain_text("won't be shown again")
    secret = page.locator("#new-secret").inner_text().strip()
    expect(page.locator("#endpoint-status")).to_have_text("enabled")
    expect(page.get_by_role("heading", name="No deliveries yet")).to_be_visible()
    assert_accessible(page)
    shoot(page, "webhooks-endpoint-new")

    page.get_by_role("button", name="Send test event").click()
    dialog = page.locator("dialog[id^=dialog-test-]")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Event type").select_option("action.approved")
    dialog.get_by_role("button", name="Send test event").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Test event queued")

    send_due(db)
    [got] = receiver.at("/hook")
    assert verify(got.body, got.all("Service-Signature"), [secret], got.now_ms).reason == "ok"
    assert b'"test":true' in got.body and b'"type":"action.approved"' in got.body
    with db.read() as conn:
        [endpoint] = endpoints.list_endpoints(conn, workspace["workspace_id"])
        [sent] = delivery_history.history(conn, endpoint_id=endpoint.id)
        detail = delivery_history.delivery_detail(conn, endpoint_id=endpoint.id, delivery_id=sent.delivery_id)
    assert [a.response_excerpt for a in detail.attempts] == ["ok"]  # what the receiver answered
    settle(page)
    page.reload()
    row = page.locator("tbody tr").first
    expect(row).to_contain_text("succeeded")
    expect(row).to_contain_text("HTTP 200")
    assert_accessible(page)
    shoot(page, "webhooks-endpoint")
    row.get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("Delivery")
    expect(page.locator("table")).to_contain_text("200")
    expect(page.locator("code.excerpt")).to_have_text("ok")
    expect(page.locator("pre.frozen-body")).to_contain_text('"test":true')
    assert_accessible(page)
    shoot(page, "webhooks-delivery")
    settle(page)
    page.go_back()

    # Five failed sends in a row disable the endpoint (the sender's rule), then re-enable it here.
    receiver.status["/hook"] = 500
    with db.write() as conn:
        for i in range(5):
            emit_event(
                conn,
                workspace_id=workspace["workspace_id"],
                event_type="action.approved",
                data={"action": {"id": f"act_{i}"}},
            )
    send_due(db)
    settle(page)
    page.reload()
    expect(page.locator("#endpoint-status")).to_contain_text("disabled — 5 consecutive failures, since")
    expect(page.get_by_role("button", name="Send test event")).to_be_disabled()
    assert_accessible(page)
    # Six deliveries with whole ids and times to the second: on a desktop no column is cut off.
    assert tables_wider_than_their_wrapper(page) == []
    shoot(page, "webhooks-endpoint-disabled")
    settle(page)
    page.goto(f"{flokit_server.base}/dashboard/webhooks")
    expect(page.locator("tbody")).to_contain_text("disabled — 5 consecutive failures")
    assert_accessible(page)
    shoot(page, "webhooks-list")
    page.locator("tbody a").first.click()
    # A link's click waits for the navigation to start, not for the page's script: pressed before
    # the script runs, Re-enable posts the no-script confirmation page instead of opening the
    # dialog (run 11, under load). Wait for the page as a person would see it.
    settle(page)

    page.get_by_role("button", name="Re-enable").click()
    enable = page.locator("dialog[id^=dialog-enable-]")
    expect(enable).to_contain_text("failure count restarts at 0")
    enable.get_by_role("button", name="Re-enable").click()
    expect(page.locator("#endpoint-status")).to_have_text("enabled")
    expect(page.locator("p.notice-ok")).to_contain_text("Endpoint enabled")
    with db.read() as conn:
        [endpoint] = endpoints.list_endpoints(conn, workspace["workspace_id"])
    assert endpoint.status == "enabled" and endpoint.consecutive_failures == 0

    page.get_by_role("button", name="Rotate signing secret").click()
    rotate = page.locator("dialog[id^=dialog-rotate-secret-]")
    expect(rotate).to_contain_text(re.compile(r"sign every delivery for 24 h, until \d{4}-\d\d-\d\d \d\d:\d\d UTC"))
    expect(rotate.get_by_role("button", name="Cancel")).to_be_focused()
    rotate.get_by_role("button", name="Rotate signing secret").click()
    expect(page.locator("#new-secret-panel")).to_contain_text("The previous secret also signs until")
    new_secret = page.locator("#new-secret").inner_text().strip()
    assert new_secret != secret
    assert_accessible(page)
    shoot(page, "webhooks-secret-rotated")

    # Both secrets sign the next delivery.
    receiver.status["/hook"] = 200
    page.get_by_role("button", name="Send test event").click()
    page.locator("dialog[id^=dialog-test-]").get_by_role("button", name="Send test event").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Test event queued")
    send_due(db)
    last = receiver.at("/hook")[-1]
    assert verify(last.body, last.all("Service-Signature"), [new_secret], last.now_ms).reason == "ok"
    assert verify(last.body, last.all("Service-Signature"), [secret], last.now_ms).reason == "ok"


def test_the_add_form_shows_its_errors_beside_the_fields(
    browser_context: tuple[Any, Any], flokit_server: GunicornServer, db: Database, receiver: Receiver
) -> None:
    """An unguarded page: the refused form answers 400, which the guard counts as a console error."""
    from playwright.sync_api import expect

    context, _ = browser_context
    page = context.new_page()
    with db.write() as conn:
        workspace = bootstrap(conn, name="Typo Co")
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.goto(f"{flokit_server.base}/dashboard/webhooks")
    page.get_by_label("URL").fill("ftp://" + receiver.url.removeprefix("http://") + "/hook")
    page.get_by_role("button", name="Add endpoint").click()
    url = page.get_by_label("URL")
    expect(url).to_have_attribute("aria-invalid", "true")
    expect(url).to_be_focused()
    expect(page.locator("#endpoint-url-error")).to_have_text("URL must use https or http.")
    expect(page.locator("#endpoint-events-error")).to_have_text("Choose at least one event type.")
    expect(url).to_have_value("ftp://" + receiver.url.removeprefix("http://") + "/hook")
    assert_accessible(page)
    shoot(page, "webhooks-add-errors")


def test_resend_recover_and_the_standard_webhooks_switch(
    page: Any, flokit_server: GunicornServer, db: Database, receiver: Receiver
) -> None:
    """Issue 36 part 4: a receiver that was down gets its events back from the dashboard."""
    from playwright.sync_api import expect

    with db.write() as conn:
        workspace = bootstrap(conn, name="Recovery Co")
        endpoint, secret = endpoints.create_endpoint(
            conn, workspace_id=workspace["workspace_id"], url=receiver.url + "/down", events=["action.approved"],
            allow_private=True, instance_key=WEBHOOK_KEY,
        )  # fmt: skip
        emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.approved", data={"n": 1})
    receiver.status["/down"] = 500
    send_due(db)  # fails: the retry waits 30 s
    receiver.status["/down"] = 200
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.goto(f"{flokit_server.base}/dashboard/webhooks/{endpoint.id}")
    settle(page)

    page.get_by_role("button", name="Recover since…").click()
    recover = page.locator("dialog[id^=dialog-recover-]")
    expect(recover).to_contain_text("sent now, once each")
    recover.get_by_label("Since (UTC)").fill("2020-01-01T00:00")
    recover.get_by_role("button", name="Recover").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Recovery queued: 1 delivery not delivered since 2020-01-01")
    assert_accessible(page)
    shoot(page, "webhooks-recovered")
    send_due(db)
    assert len(receiver.at("/down")) == 2

    page.get_by_role("button", name="Standard Webhooks headers…").click()
    switch = page.locator("dialog[id^=dialog-standard-webhooks-]")
    switch.get_by_label("Send the Standard Webhooks headers").check()
    switch.get_by_role("button", name="Save").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Standard Webhooks headers on")

    page.locator("tbody tr").first.get_by_role("link").click()
    settle(page)
    page.get_by_role("button", name="Resend").click()
    expect(page.locator("p.notice-ok")).to_contain_text("Resend queued")
    assert_accessible(page)
    shoot(page, "webhooks-delivery-resent")
    send_due(db)
    last = receiver.at("/down")[-1]
    assert last.header("Service-Attempt") == "3" and last.body == receiver.at("/down")[0].body
    assert verify(last.body, last.all("Service-Signature"), [secret], last.now_ms).reason == "ok"
    assert last.all("webhook-signature") != []  # the switch is on
