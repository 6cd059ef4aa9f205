"""The ad account page's "Sync now" over HTTP (both databases): the dialog and the no-JS
confirmation page, the request it writes (pending, the operator as `requested_by`, nothing
called), one open request per account, the status block that polls while the request is open
and shows the counts or the platform's error once it ended, 409 for a disconnected account, 404
across workspaces, CSRF.

Requests are moved on through the repository's run functions (`claim`, `finish_success`,
`finish_failure`), as the Dagster run moves them (tests/orchestration/adaccounts/
test_sync_requests.py runs that for real)."""

from __future__ import annotations

import html
import re

from flask.testing import FlaskClient

from tests.support.dashboard import OPERATOR
from tests.support.engine import WORLD, connect_registry
from warehouse.adaccounts import repository as accounts
from warehouse.adaccounts import sync_requests as requests
from warehouse.adaccounts.tables import ad_account_sync_requests
from warehouse.bootstrap import bootstrap
from warehouse.db import Database

HTMX = {"HX-Request": "true"}
POLL = 'hx-trigger="every 5s"'


def text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def rows(db: Database) -> list[tuple[str, str, str]]:
    with db.read() as conn:
        found = conn.execute(ad_account_sync_requests.select()).all()
    return [(r.ad_account_id, r.requested_by, r.status) for r in found]


def test_the_page_offers_sync_now_with_its_consequence_and_does_not_poll_when_idle(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    r = browser.get(f"/dashboard/ad-accounts/{account_id}")
    assert r.status_code == 200
    raw = r.get_data(as_text=True)
    page = text(raw)
    assert 'data-dialog="dialog-ad-sync"' in raw and POLL not in raw
    assert "Latest sync request none yet" in page and "Last successful sync never" in page
    assert "reads every campaign, ad set or ad group and ad of the account into FloKit's registry" in page
    assert "This is a sandbox" in page and "no ad platform is called" in page
    assert "actions change these rows and no ad platform is called" in page  # the sandbox label stays
    # without JavaScript the button leads to the same question on a page of its own
    confirm = browser.get(f"/dashboard/ad-accounts/{account_id}/sync")
    assert confirm.status_code == 200
    assert "Sync the registry now?" in text(confirm.get_data(as_text=True))
    assert f'action="/dashboard/ad-accounts/{account_id}/sync"' in confirm.get_data(as_text=True)
    assert rows(db) == []


def test_sync_now_writes_a_pending_request_by_the_operator_and_the_page_polls_it(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    r = browser.post(f"/dashboard/ad-accounts/{account_id}/sync", data={"csrf_token": token})
    assert r.status_code == 303
    assert rows(db) == [(account_id, OPERATOR, "pending")]
    with db.read() as conn:
        [pending] = requests.recent_requests(conn, ad_account_id=account_id)
    assert r.headers["Location"] == f"/dashboard/ad-accounts/{account_id}?requested={pending.id}"
    landed = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert POLL in landed
    assert f"Sync {pending.id} requested." in text(landed)
    assert f"pending {pending.id} , requested by {OPERATOR}" in text(landed)
    assert "waiting for the daemon to start it" in text(landed) and "This updates every 5 s" in text(landed)
    # a second click without JavaScript: the same request, said so
    again = browser.post(f"/dashboard/ad-accounts/{account_id}/sync", data={"csrf_token": token})
    assert again.status_code == 303 and "already=1" in again.headers["Location"]
    assert "nothing new was requested" in text(browser.get(again.headers["Location"]).get_data(as_text=True))
    assert len(rows(db)) == 1


def test_with_htmx_202_for_a_new_request_200_for_the_open_one_and_the_poll_follows_it_to_its_end(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    path = f"/dashboard/ad-accounts/{account_id}"
    first = browser.post(f"{path}/sync", headers={**HTMX, "X-CSRFToken": token})
    part = first.get_data(as_text=True)
    assert first.status_code == 202 and part.lstrip().startswith('<div id="ad-sync-status"') and "<html" not in part
    assert POLL in part and "requested just now" in text(part)
    second = browser.post(f"{path}/sync", headers={**HTMX, "X-CSRFToken": token})
    assert second.status_code == 200 and "already requested, nothing new requested" in text(
        second.get_data(as_text=True)
    )
    assert len(rows(db)) == 1
    with db.write() as conn:
        [asked] = requests.recent_requests(conn, ad_account_id=account_id)
        requests.claim(conn, request_id=asked.id, run_id="run-1")
    running = browser.get(f"{path}/status", headers=HTMX).get_data(as_text=True)
    assert POLL in running and "running since" in text(running)
    with db.write() as conn:
        requests.finish_success(
            conn, request_id=asked.id, counts=accounts.SyncCounts(created=2, updated=1, unchanged=6, removed=1),
            mapped_campaigns=3, mapped_creatives=4, summary="9 object(s) listed",
        )  # fmt: skip
    done = browser.get(f"{path}/status", headers=HTMX).get_data(as_text=True)
    assert POLL not in done
    assert "succeeded" in text(done)
    assert "9 object(s) listed, 2 new, 1 changed, 6 unchanged, 1 no longer listed" in text(done)
    assert "3 campaign(s) and 4 creative(s) mapped to report labels" in text(done)
    # the status address without htmx is the page; the history lists the request
    assert browser.get(f"{path}/status").status_code == 303
    page = text(browser.get(path).get_data(as_text=True))
    assert f"{asked.id} {OPERATOR} succeeded" in page and "Show the registry as synced" in page


def test_a_failed_request_shows_the_platforms_error(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    browser.post(f"/dashboard/ad-accounts/{account_id}/sync", data={"csrf_token": token})
    with db.write() as conn:
        [asked] = requests.recent_requests(conn, ad_account_id=account_id)
        requests.claim(conn, request_id=asked.id, run_id="run-1")
        requests.finish_failure(
            conn, request_id=asked.id, code="auth",
            message="Error validating access token: The session has been invalidated.",
        )  # fmt: skip
    raw = browser.get(f"/dashboard/ad-accounts/{account_id}").get_data(as_text=True)
    page = text(raw)
    assert POLL not in raw
    assert "failed" in page and "auth — Error validating access token: The session has been invalidated." in page
    assert "auth : Error validating access token" in page  # and in the history table


def test_a_disconnected_account_cannot_sync(browser: FlaskClient, db: Database, workspace: dict, token: str) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    with db.write() as conn:
        accounts.remove(conn, ad_account_id=account_id, workspace_id=workspace["workspace_id"], actor="t")
    page = text(browser.get(f"/dashboard/ad-accounts/{account_id}").get_data(as_text=True))
    assert "Disconnected: it cannot sync" in page and "Sync now" not in page
    r = browser.post(f"/dashboard/ad-accounts/{account_id}/sync", data={"csrf_token": token})
    assert r.status_code == 409 and r.mimetype == "text/html"
    assert "is disconnected; connect it again before syncing" in text(r.get_data(as_text=True))
    r = browser.post(f"/dashboard/ad-accounts/{account_id}/sync", headers={**HTMX, "X-CSRFToken": token})
    assert r.status_code == 409 and "is disconnected" in text(r.get_data(as_text=True))
    assert rows(db) == []


def test_another_workspaces_account_is_a_404_page(browser: FlaskClient, db: Database, token: str) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    theirs = connect_registry(db, other["workspace_id"], WORLD)
    for r in (
        browser.get(f"/dashboard/ad-accounts/{theirs}"),
        browser.get(f"/dashboard/ad-accounts/{theirs}/status", headers=HTMX),
        browser.get(f"/dashboard/ad-accounts/{theirs}/sync"),
        browser.post(f"/dashboard/ad-accounts/{theirs}/sync", data={"csrf_token": token}),
        browser.post(f"/dashboard/ad-accounts/{theirs}/sync", headers={**HTMX, "X-CSRFToken": token}),
    ):
        assert r.status_code == 404 and r.mimetype == "text/html"
        assert "<h1>Not found</h1>" in r.get_data(as_text=True)
    assert rows(db) == []


def test_csrf_and_sign_in_are_required(
    client: FlaskClient, browser: FlaskClient, db: Database, workspace: dict
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    r = browser.post(f"/dashboard/ad-accounts/{account_id}/sync")
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    assert browser.post(f"/dashboard/ad-accounts/{account_id}/sync", headers=HTMX).status_code == 400
    fresh = client.application.test_client()
    assert fresh.post(f"/dashboard/ad-accounts/{account_id}/sync").status_code == 401
    assert fresh.get(f"/dashboard/ad-accounts/{account_id}/status", headers=HTMX).status_code == 401
    assert rows(db) == []
