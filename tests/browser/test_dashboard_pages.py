"""Every dashboard page, crawled in a real browser on the demo workspace and on an empty one.

Signed in, the crawl follows every link of the main navigation (whatever pages exist: a page
added to the nav is covered without a change here), every action's detail link on the first
queue page, and the no-JavaScript confirmation pages of the queue's verbs. On each page: the
strict CSP header, no console error and no request off 127.0.0.1 (the `page` guard), zero axe
violations (at 1280 and at 390 px), one `h1`, the title "Section · FloKit", the current nav
entry marked, no horizontal overflow of the document at 390 px (tables scroll inside their
wrapper; on the Actions pages no table needs a sideways scroll at 1280 px), and screenshots at
1280 and 390 px (test-artifacts/screenshots/crawl-*.png).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from tests.browser.demo_world import (
    ACTIONS_PATH,
    check_at_phone_width,
    create_ready,
    settle,
    sign_in,
    tables_wider_than_their_wrapper,
)
from tests.browser.support import assert_accessible, expect, shoot
from tests.support import GunicornServer
from tests.support.demo_world import World
from warehouse.db import Database

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
NAV_LINKS = "header nav[aria-label='Main'] a[href^='/dashboard/']"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def visit(
    page: Any,
    server: GunicornServer,
    path: str,
    *,
    title: str | None,
    shot: str,
    nav: str | None,
    desktop_fit: bool = False,
) -> None:
    """Open `path` and check everything a dashboard page owes its reader; `title` is the section
    (None: the page's own h1 is its section, as on an action's detail)."""
    response = page.goto(f"{server.base}{path}")
    assert response is not None and response.status == 200, (path, response and response.status)
    assert response.headers.get("content-security-policy") == CSP, path
    settle(page)

    h1 = page.locator("h1")
    expect(h1).to_have_count(1)
    section = title if title is not None else h1.inner_text().strip()
    assert page.title() == f"{section} · FloKit", (path, page.title())
    if nav is not None:
        current = page.locator("header nav[aria-label='Main'] a[aria-current='page']")
        expect(current).to_have_count(1)
        expect(current).to_have_text(nav)
    assert_accessible(page)
    if desktop_fit:  # the Actions pages: on a 1280 px desktop nothing needs a sideways scroll
        assert tables_wider_than_their_wrapper(page) == [], path
    check_at_phone_width(page, path)
    shoot(page, shot)


def nav_entries(page: Any) -> list[tuple[str, str]]:
    """(label, path) of every link in the main navigation, as the signed-in page shows them."""
    links = page.locator(NAV_LINKS)
    return [(links.nth(i).inner_text().strip(), str(links.nth(i).get_attribute("href"))) for i in range(links.count())]


def crawl(page: Any, server: GunicornServer, world: str) -> dict[str, list[str]]:
    """Visit every page reachable from the nav and the first queue page; what was visited."""
    entries = nav_entries(page)
    assert ("Actions", ACTIONS_PATH) in entries, entries
    for label, path in entries:
        visit(page, server, path, title=label, shot=f"crawl-{slug(label)}-{world}", nav=label)

    visit(page, server, ACTIONS_PATH, title="Actions", shot=f"crawl-actions-{world}", nav="Actions", desktop_fit=True)
    rows = page.locator("tbody#rows tr")
    details = [
        (
            str(rows.nth(i).locator("td:first-child a").get_attribute("href")),
            slug(
                rows.nth(i).locator("td:nth-child(2)").inner_text() + " " + rows.nth(i).locator(".badge").inner_text()
            ),
        )
        for i in range(rows.count())
    ]
    confirm_forms = page.locator("tbody#rows form[method='get']")
    confirm_paths = [str(confirm_forms.nth(i).get_attribute("action")) for i in range(confirm_forms.count())]
    for path, name in details:
        visit(page, server, path, title=None, shot=f"crawl-action-{name}-{world}", nav="Actions", desktop_fit=True)
    for path in confirm_paths:
        verb = urlsplit(path).path.rsplit("/", 1)[-1]
        visit(
            page,
            server,
            f"{path}?next={ACTIONS_PATH}",
            title=None,
            shot=f"crawl-confirm-{verb}-{world}",
            nav="Actions",
            desktop_fit=True,
        )
    return {"nav": [p for _, p in entries], "details": [p for p, _ in details], "confirm": confirm_paths}


def test_every_page_on_the_demo_workspace(page: Any, demo_server: GunicornServer, demo_world: World) -> None:
    walked, workspace = demo_world.walked, demo_world.workspace
    ready = create_ready(demo_server, workspace, "offer_test", "A client's own proposal, ready to decide")
    sign_in(page, demo_server, demo_world.db, workspace["workspace_id"])

    visited = crawl(page, demo_server, "demo")

    assert {p.rsplit("/", 1)[-1] for p in visited["details"]} == {*walked.values(), ready}
    # The ready action offers approve and reject; the running shift, roll back (the rest: nothing).
    assert sorted(urlsplit(p).path.split("/", 3)[-1] for p in visited["confirm"]) == sorted(
        [f"{ready}/approve", f"{ready}/reject", f"{walked['budget_shift']}/rollback"]
    )
    # A client's own proposal says in words that nothing was estimated (not "not_estimated: not_estimated").
    page.goto(f"{demo_server.base}{ACTIONS_PATH}/{ready}")
    expect(page.locator("h3 + p")).to_have_text("Not estimated: FloKit evaluated nothing for this action.")


def test_every_page_on_an_empty_workspace(
    page: Any, flokit_server: GunicornServer, db: Database, workspace: dict
) -> None:
    sign_in(page, flokit_server, db, workspace["workspace_id"])

    visited = crawl(page, flokit_server, "empty")

    assert visited["details"] == [] and visited["confirm"] == []
    page.goto(f"{flokit_server.base}{ACTIONS_PATH}")
    expect(page.locator("#empty-title")).to_have_text("No actions yet")
    expect(page.locator("main")).to_contain_text("flokit refresh")
