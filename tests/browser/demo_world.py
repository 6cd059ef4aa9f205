"""What the dashboard's browser flows start from: a real FloKit under gunicorn with an instance key,
an operator signed in through a one-time link, and actions that are real.

Real actions come two ways, both as an operator would meet them: the engine's, in the populated
demo world (tests/support/demo_world.py: `flokit demo seed` + `flokit refresh` + `flokit demo walkthrough`
run as commands, built once per run and copied by file into each test, the `demo_world` fixture),
or a client's, created with `POST /v1/actions` (status ready). What the dashboard did is read back over v1
(`GET /v1/actions/<id>`), the API a client reads it with.
"""

from __future__ import annotations

from typing import Any

import requests

from tests.browser.support import TWO_FRAMES, assert_accessible, press_sign_in, tables_scrolling_sideways
from tests.support import GunicornServer
from warehouse.dashboard import sessions
from warehouse.db import Database

OPERATOR = "maya@example.com"
ACTIONS_PATH = "/dashboard/actions"
PHONE = 390


def login_link(server: GunicornServer, db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    """A one-time sign-in link, as `flokit admin login-link` mints it."""
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=operator, workspace_id=workspace_id)
    return f"{server.base}/dashboard/login?token={token}"


def sign_in(page: Any, server: GunicornServer, db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    """Open a fresh link in `page` and press Sign in; it lands on the Actions page. Returns the link
    (used now)."""
    link = login_link(server, db, workspace_id, operator)
    press_sign_in(page, link)
    assert page.url == f"{server.base}{ACTIONS_PATH}", page.url
    settle(page)
    return link


def settle(page: Any) -> None:
    """Wait until the page has loaded everything, its icon too: chromium fetches the icon after
    the load event, and leaving the page before it arrives aborts it, which the guard counts as a
    failed request (seen on the sign-out click right after signing in)."""
    page.wait_for_load_state("networkidle")


def v1(server: GunicornServer, key: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    """A v1 request with a bearer key: (status, JSON body)."""
    answer = requests.request(
        method, f"{server.base}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    return answer.status_code, dict(answer.json())


def create_ready(server: GunicornServer, workspace: dict, action_type: str = "budget_shift", reason: str = "") -> str:
    """A client's own proposal over `POST /v1/actions`: listed as ready. Its id."""
    status, body = v1(
        server,
        workspace["api_key_read_write"],
        "POST",
        "/v1/actions",
        {"workspace_id": workspace["workspace_id"], "type": action_type, "reason": reason or f"A {action_type} to try"},
    )
    assert status == 201 and body["status"] == "ready_for_approval", body
    return str(body["id"])


def v1_action(server: GunicornServer, workspace: dict, action_id: str) -> dict:
    status, body = v1(server, workspace["api_key_read_only"], "GET", f"/v1/actions/{action_id}")
    assert status == 200, body
    return dict(body["action"])


def transitions(action: dict) -> list[tuple[str | None, str, str, str | None]]:
    """(from, to, actor, note) of each status change in a v1 action's history, oldest first."""
    return [
        (h["from_status"], h["to_status"], h["actor"], h["note"])
        for h in action["history"]
        if h["entry"] == "transition"
    ]


def tables_wider_than_their_wrapper(page: Any) -> list[str]:
    """The captions of the tables that need a horizontal scroll at the current width."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.table-wrap')]
                       .filter(w => w.scrollWidth > w.clientWidth)
                       .map(w => (w.querySelector('caption') || w).textContent.trim())"""
        )
    )


def check_at_phone_width(page: Any, path: str) -> None:
    """At 390 px: the document no wider than the viewport (a wide table scrolls inside its
    wrapper), and axe again (what scrolls, and so must be reachable by keyboard, differs)."""
    before = page.viewport_size
    page.set_viewport_size({"width": PHONE, "height": 800})
    try:
        page.evaluate(TWO_FRAMES)
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE, f"{path} is {width} px wide at {PHONE} px (tables must scroll in their wrapper)"
        # A list or a detail table reads as one card per row on a phone, nothing hidden sideways.
        sideways = tables_scrolling_sideways(page)
        assert sideways == [], f"{path}: at {PHONE} px these tables need a sideways scroll: {sideways}"
        assert_accessible(page)
    finally:
        page.set_viewport_size(before)
