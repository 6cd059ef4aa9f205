"""The Actions pages and sign-in in a real browser: Debian's chromium driving FloKit under gunicorn.

Sign in with a one-time link (its page names the workspace and the operator; a link preview's
fetch uses nothing; the Sign in button, by mouse or keyboard, does; a reused link is refused),
sign out and sign out everywhere; approve and reject with the mouse and with the keyboard alone
(focus lands in the updated row); a reject without a reason keeps its dialog open with the error;
roll back the demo's running budget shift through its dialog; a conflict (approved over v1
meanwhile) shows the current state; a POST without the CSRF token is 400. Every transition is
read back over v1 with the operator's email as
the actor. The `page` guard fails a test on any console error it did not announce (an HTTP error
page loaded on purpose is logged by chromium as one) and on any request off 127.0.0.1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.browser.demo_world import (
    ACTIONS_PATH,
    OPERATOR,
    check_at_phone_width,
    create_ready,
    login_link,
    settle,
    sign_in,
    tables_wider_than_their_wrapper,
    transitions,
    v1,
    v1_action,
)
from tests.browser.support import PageGuard, assert_accessible, child_pytest, expect, shoot
from tests.support import GunicornServer
from tests.support.actions import literal_content
from tests.support.demo_world import World
from transforms.actions.consequences import approve_consequence
from warehouse.actions.repository import create_action
from warehouse.db import Database
from warehouse.settings import Settings

OTHER = "lee@example.com"  # someone acting over v1 meanwhile


@pytest.fixture
def settings(module_settings: Settings) -> Settings:
    """The module's one database: each test signs in to and acts in a workspace of its own."""
    return module_settings


@pytest.fixture
def flokit_server(module_server: GunicornServer) -> GunicornServer:
    """The module's one gunicorn, on `module_settings`."""
    return module_server


def guard_of(browser_context: tuple[Any, PageGuard]) -> PageGuard:
    return browser_context[1]


def focused(page: Any) -> dict[str, Any]:
    """Where the keyboard focus is: the element's tag and id, and the row it is in (if any)."""
    return dict(
        page.evaluate(
            """() => { const e = document.activeElement; const row = e && e.closest('tr[id^="row-"]');
                       return {tag: e ? e.tagName : null, id: e ? e.id : null, row: row ? row.id : null}; }"""
        )
    )


def tab_to(page: Any, element_id: str, *, backwards: bool = False, limit: int = 60) -> None:
    """Press Tab (or Shift+Tab) until the element with `element_id` has the focus: the keyboard alone."""
    for _ in range(limit):
        if focused(page)["id"] == element_id:
            return
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
    raise AssertionError(f"#{element_id} never got the focus in {limit} presses; last: {focused(page)}")


# --- sign-in ------------------------------------------------------------------------------------


def test_a_link_shows_who_and_where_then_the_button_signs_in_once(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    link = login_link(flokit_server, db, workspace["workspace_id"])
    # A chat's link preview fetches the address first: that uses nothing.
    assert requests.get(link, timeout=10).status_code == 200

    response = page.goto(link)
    assert response is not None and response.status == 200
    expect(page.locator("h1")).to_have_text(f"Sign in to Acme Fitness as {OPERATOR}")
    expect(page.locator("main")).to_contain_text(workspace["workspace_id"])
    expect(page.locator("main time")).to_contain_text(" UTC")
    expect(page.locator("main")).to_contain_text("This link works once")
    settle(page)
    assert_accessible(page)
    check_at_phone_width(page, link)
    shoot(page, "login-confirm")
    page.get_by_role("button", name="Sign in").click()

    expect(page).to_have_url(f"{flokit_server.base}{ACTIONS_PATH}")
    expect(page.locator("h1")).to_have_text("Actions")
    expect(page.locator(".whoami")).to_contain_text(f"Signed in as {OPERATOR}")
    expect(page.locator(".whoami")).to_contain_text(workspace["workspace_id"])
    assert page.title() == "Actions · FloKit"
    settle(page)

    # The same link again, in the same browser: refused with 410, and the page says what to do.
    guard_of(browser_context).expect_console_error("status of 410")
    response = page.goto(link)
    assert response is not None and response.status == 410
    expect(page.locator("h1")).to_have_text("Link no longer valid")
    expect(page.locator("main")).to_contain_text("This sign-in link was already used")
    expect(page.locator("main")).to_contain_text("Ask for a new link in a terminal")
    expect(page.locator("main pre")).to_have_text("flokit admin login-link --as you@example.com")
    expect(page.get_by_role("button", name="Sign in")).to_have_count(0)
    assert_accessible(page)
    check_at_phone_width(page, link)
    shoot(page, "signin-link-refused")
    page.context.close()  # delivers the console events still in flight before the guard is read
    assert [line.split(" (at ")[0] for line in guard_of(browser_context).excused] == [
        "console error: Failed to load resource: the server responded with a status of 410 (GONE)"
    ]


def test_the_keyboard_alone_signs_in_from_the_links_page(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    page.goto(login_link(flokit_server, db, workspace["workspace_id"]))
    settle(page)
    tab_to(page, "sign-in")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{flokit_server.base}{ACTIONS_PATH}")
    expect(page.locator(".whoami")).to_contain_text(f"Signed in as {OPERATOR}")
    settle(page)


def test_signed_out_a_page_asks_to_sign_in(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, workspace: dict
) -> None:
    guard_of(browser_context).expect_console_error("status of 401")
    response = page.goto(f"{flokit_server.base}{ACTIONS_PATH}")

    assert response is not None and response.status == 401
    expect(page.locator("h1")).to_have_text("Sign-in needed")
    expect(page.locator("main")).to_contain_text("You are not signed in.")
    expect(page.locator("main pre")).to_have_text("flokit admin login-link --as you@example.com")
    expect(page.get_by_role("button", name="Sign out")).to_have_count(0)
    assert_accessible(page)
    check_at_phone_width(page, ACTIONS_PATH)
    shoot(page, "signin-needed")


@contextmanager
def other_browser(browser: Any) -> Iterator[tuple[Any, PageGuard]]:
    """A second browser (its own cookies) and its guard: closed afterwards, and it must have met
    no problem the test did not excuse."""
    other = browser.new_context()
    guard = PageGuard.watch(other)
    try:
        yield other.new_page(), guard
    finally:
        other.close()
    assert guard.failures() == []


def test_sign_out_ends_this_browser_only(
    page: Any,
    browser_context: tuple[Any, PageGuard],
    browser: Any,
    flokit_server: GunicornServer,
    db: Database,
    workspace: dict,
) -> None:
    with other_browser(browser) as (other_page, _):
        sign_in(other_page, flokit_server, db, workspace["workspace_id"])
        sign_in(page, flokit_server, db, workspace["workspace_id"])

        page.get_by_role("button", name="Sign out", exact=True).click()
        expect(page.locator("h1")).to_have_text("Signed out")
        expect(page.locator("main")).to_contain_text("You are signed out of this browser.")
        assert_accessible(page)
        check_at_phone_width(page, page.url)
        shoot(page, "signin-signed-out")
        assert page.url == f"{flokit_server.base}/dashboard/signed-out"
        guard_of(browser_context).expect_console_error("status of 401")
        assert page.goto(f"{flokit_server.base}{ACTIONS_PATH}").status == 401
        expect(page.locator("main")).to_contain_text("You are not signed in.")

        # The other browser's session is its own: still signed in.
        assert other_page.reload().status == 200
        expect(other_page.locator(".whoami")).to_contain_text(f"Signed in as {OPERATOR}")


def test_sign_out_everywhere_ends_the_other_browsers_sessions(
    page: Any,
    browser_context: tuple[Any, PageGuard],
    browser: Any,
    flokit_server: GunicornServer,
    db: Database,
    workspace: dict,
) -> None:
    # Sign out everywhere ends the operator's sessions in every workspace, and the module's other
    # tests sign OPERATOR in to theirs: this one is someone who signed in nowhere else.
    operator = "sam@example.com"
    with other_browser(browser) as (other_page, other_guard):
        sign_in(other_page, flokit_server, db, workspace["workspace_id"], operator)
        sign_in(page, flokit_server, db, workspace["workspace_id"], operator)

        page.get_by_role("button", name="Sign out everywhere").click()
        expect(page.locator("main")).to_contain_text("Your sessions in every browser have ended (2 in all).")

        # The second browser still holds its cookie, but the session behind it is gone.
        other_guard.expect_console_error("status of 401")
        assert other_page.reload().status == 401
        expect(other_page.locator("main")).to_contain_text("Your session has ended.")
        guard_of(browser_context).expect_console_error("status of 401")
        assert page.goto(f"{flokit_server.base}{ACTIONS_PATH}").status == 401


# --- approve and reject ---------------------------------------------------------------------------


def test_approve_and_reject_with_the_mouse(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    shift = create_ready(flokit_server, workspace, "budget_shift")
    pause = create_ready(flokit_server, workspace, "creative_pause")
    sign_in(page, flokit_server, db, workspace["workspace_id"])

    row = page.locator(f"#row-{shift}")
    expect(row.locator(".badge")).to_have_text("ready")
    row.get_by_role("button", name="Approve").click()
    dialog = page.locator(f"#dialog-approve-{shift}")
    expect(dialog).to_be_visible()
    expect(dialog.locator("h2")).to_contain_text("Approve:")
    # The consequence, stated before the click: a client's action carries no parameters to apply.
    expect(dialog.locator(f"#dialog-approve-{shift}-consequence")).to_have_text(
        approve_consequence("budget_shift", {}, [])
    )
    assert_accessible(page)
    shoot(page, "actions-dialog-approve")
    dialog.locator(f"#form-approve-{shift}-note").fill("Looks right for the weekend.")
    dialog.get_by_role("button", name="Approve").click()

    expect(row.locator(".badge")).to_have_text("approved")
    expect(dialog).to_have_count(0)  # the row was swapped: its dialogs went with it
    expect(row).to_contain_text(OPERATOR)  # the "Approved by" column
    expect(page.locator("#toasts")).to_contain_text("Done: approved")

    other = page.locator(f"#row-{pause}")
    other.get_by_role("button", name="Reject").click()
    reject = page.locator(f"#dialog-reject-{pause}")
    expect(reject).to_be_visible()
    reject.locator(f"#form-reject-{pause}-reason").fill("The creative is still learning.")
    reject.get_by_role("button", name="Reject").click()
    expect(other.locator(".badge")).to_have_text("rejected")
    expect(page.locator("#toast-errors")).to_be_empty()

    assert transitions(v1_action(flokit_server, workspace, shift))[-1] == (
        "ready", "approved", OPERATOR, "Looks right for the weekend."
    )  # fmt: skip
    assert v1_action(flokit_server, workspace, shift)["approved_by"] == OPERATOR
    assert transitions(v1_action(flokit_server, workspace, pause))[-1] == (
        "ready", "rejected", OPERATOR, "The creative is still learning."
    )  # fmt: skip
    # A plain GET (what a reload or a browser without JavaScript sees) agrees.
    page.reload()
    expect(page.locator(f"#row-{shift} .badge")).to_have_text("approved")
    expect(page.locator(f"#row-{pause} .badge")).to_have_text("rejected")


def test_approve_and_reject_with_the_keyboard_alone(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    shift = create_ready(flokit_server, workspace, "budget_shift")
    pause = create_ready(flokit_server, workspace, "creative_pause")
    sign_in(page, flokit_server, db, workspace["workspace_id"])

    # Approve: Tab to the row's button, Enter opens the dialog, type a note, Tab to Approve, Enter.
    tab_to(page, f"open-approve-{shift}")
    page.keyboard.press("Enter")
    expect(page.locator(f"#dialog-approve-{shift}")).to_be_visible()
    tab_to(page, f"form-approve-{shift}-note")
    page.keyboard.type("Keyboard only.")
    page.keyboard.press("Tab")  # Cancel
    page.keyboard.press("Tab")
    expect(page.locator(f"#dialog-approve-{shift}").get_by_role("button", name="Approve")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(f"#row-{shift} .badge")).to_have_text("approved")
    expect(page.locator(f"#row-{shift}")).to_be_focused()  # focus returns to the updated row
    assert focused(page)["row"] == f"row-{shift}" and focused(page)["tag"] != "BODY"

    # Reject: Enter opens, Escape closes with the focus back on the trigger, Enter opens again
    # with the focus on Cancel; Shift+Tab to the reason, Tab twice to Reject, Enter.
    tab_to(page, f"open-reject-{pause}")
    page.keyboard.press("Enter")
    dialog = page.locator(f"#dialog-reject-{pause}")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.locator(f"#open-reject-{pause}")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(page.locator(f"#form-reject-{pause}-reason")).to_be_focused()
    page.keyboard.type("Not with the keyboard's budget.")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(dialog.get_by_role("button", name="Reject")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator(f"#row-{pause} .badge")).to_have_text("rejected")
    expect(page.locator(f"#row-{pause}")).to_be_focused()
    assert focused(page)["row"] == f"row-{pause}"

    assert transitions(v1_action(flokit_server, workspace, shift))[-1] == (
        "ready",
        "approved",
        OPERATOR,
        "Keyboard only.",
    )
    assert transitions(v1_action(flokit_server, workspace, pause))[-1] == (
        "ready", "rejected", OPERATOR, "Not with the keyboard's budget."
    )  # fmt: skip


def test_a_reject_without_a_reason_keeps_the_dialog_open_with_the_error(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    action = create_ready(flokit_server, workspace, "offer_test")
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.locator(f"#row-{action}").get_by_role("button", name="Reject").click()
    dialog = page.locator(f"#dialog-reject-{action}")
    reason = dialog.locator(f"#form-reject-{action}-reason")

    # Empty: the browser's own check (the field is required) holds the form back.
    dialog.get_by_role("button", name="Reject").click()
    expect(dialog).to_be_visible()
    assert reason.evaluate("e => e.validity.valueMissing") is True

    # Only spaces: past the browser, refused by the server (400), the error beside the field.
    guard_of(browser_context).expect_console_error("status of 400")
    reason.fill("   ")
    dialog.get_by_role("button", name="Reject").click()
    error = dialog.locator(f"#form-reject-{action}-error")
    expect(error).to_have_text("Give a reason: it is kept in the action's history.")
    expect(dialog).to_be_visible()
    expect(reason).to_have_attribute("aria-invalid", "true")
    expect(reason).to_have_attribute("aria-describedby", f"form-reject-{action}-error")
    expect(page.locator(f"#row-{action} .badge")).to_have_text("ready")
    expect(page.locator("#toast-errors")).to_be_empty()
    assert_accessible(page)
    shoot(page, "actions-dialog-reject-error")

    # The swapped form still posts through htmx: a reason now rejects it.
    reason.fill("Ran the same test last month.")
    dialog.get_by_role("button", name="Reject").click()
    expect(page.locator(f"#row-{action} .badge")).to_have_text("rejected")
    assert transitions(v1_action(flokit_server, workspace, action))[1:] == [
        ("ready", "rejected", OPERATOR, "Ran the same test last month.")
    ]


def test_a_conflict_shows_the_current_state(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    action = create_ready(flokit_server, workspace, "budget_shift")
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    page.locator(f"#row-{action}").get_by_role("button", name="Approve").click()
    expect(page.locator(f"#dialog-approve-{action}")).to_be_visible()

    # Meanwhile, someone approves it over v1.
    status, body = v1(
        flokit_server,
        workspace["api_key_read_write"],
        "POST",
        f"/v1/actions/{action}/approve",
        {"approved_by": OTHER, "note": "Done from a script."},
    )
    assert status == 200, body

    guard_of(browser_context).expect_console_error("status of 409")
    page.locator(f"#dialog-approve-{action}").get_by_role("button", name="Approve").click()
    row = page.locator(f"#row-{action}")
    notice = row.locator(".notice")
    expect(notice).to_contain_text(f"Someone acted first: this action is already approved by {OTHER} at ")
    expect(row.locator(".badge")).to_have_text("approved")
    expect(row).to_contain_text(OTHER)
    expect(row).to_be_focused()
    expect(page.locator("#toast-errors")).to_be_empty()
    assert tables_wider_than_their_wrapper(page) == []  # the notice fits a 1280 px desktop
    shoot(page, "actions-conflict")

    assert [t[1:3] for t in transitions(v1_action(flokit_server, workspace, action))][1:] == [("approved", OTHER)]


def test_a_drafts_disabled_approve_and_its_reason_fit_the_queue_at_1280_px(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    """The engine's drafts name every failing guardrail check beside the disabled Approve."""
    content = literal_content("budget_shift", guardrails_pass=False)
    checks = [
        *content.guardrail_checks,
        {"check": "cooldown_elapsed", "passed": False, "detail": "the last shift of this pair ended 2 days ago"},
    ]
    with db.write() as conn:
        draft = create_action(
            conn,
            workspace_id=workspace["workspace_id"],
            action_type="budget_shift",
            content=replace(content, guardrail_checks=checks),
            actor="engine",
            origin="engine",
        )
    assert draft.status == "draft"
    sign_in(page, flokit_server, db, workspace["workspace_id"])
    row = page.locator(f"#row-{draft.id}")
    expect(row.get_by_role("button", name="Approve")).to_be_disabled()
    expect(row.locator(".why-not")).to_have_text("A guardrail check fails: minimum_cohort_size, cooldown_elapsed")
    shoot(page, "actions-draft")


def test_roll_back_the_demos_running_shift_through_its_dialog(
    page: Any, demo_server: GunicornServer, demo_world: World
) -> None:
    shift, workspace = demo_world.walked["budget_shift"], demo_world.workspace
    sign_in(page, demo_server, demo_world.db, workspace["workspace_id"])
    expect(page.locator(f"#row-{shift} .badge")).to_have_text("running")

    link = page.locator(f"#row-{shift}").get_by_role("link")
    title = link.inner_text()
    link.click()
    expect(page.locator("h1")).to_have_text(title)
    page.get_by_role("button", name="Roll back").click()
    dialog = page.locator(f"#dialog-rollback-{shift}")
    expect(dialog).to_be_visible()
    expect(dialog.locator("p").first).to_contain_text("sandbox")  # the consequence names the ad account
    shoot(page, "actions-dialog-rollback")
    dialog.get_by_role("button", name="Roll back").click()

    detail = page.locator("#action-detail")
    expect(detail.locator(".facts .badge").first).to_have_text("rolled back")
    expect(detail).to_be_focused()
    expect(page.get_by_role("button", name="Roll back")).to_have_count(0)
    last = detail.locator("table.history tbody tr").last  # the history: who rolled it back, the status as words
    expect(last.locator("td").nth(3)).to_have_text(OPERATOR)
    expect(last.locator("td").nth(4)).to_have_text("rolled back")
    assert transitions(v1_action(demo_server, workspace, shift))[-1] == ("running", "rolled_back", OPERATOR, None)


# --- CSRF -----------------------------------------------------------------------------------------


def test_a_post_without_the_csrf_token_is_400(
    page: Any, browser_context: tuple[Any, PageGuard], flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    action = create_ready(flokit_server, workspace, "budget_shift")
    sign_in(page, flokit_server, db, workspace["workspace_id"])

    # With the session cookie but no token (Playwright's request context shares the page's cookies).
    answer = page.request.post(f"{flokit_server.base}/dashboard/actions/{action}/approve", form={"note": "forged"})
    assert answer.status == 400
    assert "CSRF token is missing" in answer.text()

    # A real form whose token field was removed before submitting: the 400 page, nothing signed out.
    page.locator("form[action='/dashboard/logout'] input[name=csrf_token]").evaluate("e => e.remove()")
    guard_of(browser_context).expect_console_error("status of 400")
    with page.expect_navigation():
        page.get_by_role("button", name="Sign out", exact=True).click()
    expect(page.locator("h1")).to_have_text("Bad request")
    expect(page.locator("main")).to_contain_text("CSRF token is missing")
    assert_accessible(page)
    check_at_phone_width(page, "/dashboard/logout")
    shoot(page, "error-400-csrf")

    assert page.goto(f"{flokit_server.base}{ACTIONS_PATH}").status == 200  # still signed in
    assert v1_action(flokit_server, workspace, action)["status"] == "ready"


# --- the guard's allowance, proven on its own -------------------------------------------------------

ANNOUNCED = """
def test_announced_and_logged_once(page, browser_context):
    browser_context[1].expect_console_error("on purpose")
    page.goto("data:text/html,<title>x</title><script>console.error('logged on purpose')</script>")


def test_announced_but_never_logged(page, browser_context):
    browser_context[1].expect_console_error("status of 410")
    page.goto("data:text/html,<title>ok</title><h1>ok</h1>")


def test_announced_once_logged_twice(page, browser_context):
    browser_context[1].expect_console_error("on purpose")
    page.goto("data:text/html,<script>console.error('on purpose 1');console.error('on purpose 2')</script>")
"""


def test_an_announced_console_error_is_excused_once_and_must_happen(browser: Any, tmp_path: Path) -> None:
    """`expect_console_error` excuses exactly one matching message; one never logged fails the test."""
    result = child_pytest(tmp_path, ANNOUNCED, COLUMNS="200")
    out = result.stdout + result.stderr

    assert "2 failed, 1 passed" in out, out
    assert "expected console error never logged: 'status of 410'" in out, out
    assert "  - console error: on purpose 2" in out and "  - console error: on purpose 1" not in out, out
