"""The dashboard's integration and ad account pages over HTTP: list, detail, sync now, polling.

Syncs are moved through the repository's own run functions (`start_sync`, `finish_failure`), as
the Dagster job moves them; what "Sync now" queued is compared with what
`POST /v1/integrations/{id}/sync` queues.
"""

from __future__ import annotations

import html
import re

import pytest
from flask.testing import FlaskClient

from tests.support import bearer
from tests.support.engine import WORLD, connect_registry
from tests.support.integrations import KEY, connect
from warehouse.adaccounts import repository as accounts
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.integrations.tables import integration_syncs

HTMX = {"HX-Request": "true"}
POLL = 'hx-trigger="every 5s"'


def text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def syncs(db: Database) -> list[tuple[str, str, str]]:
    with db.read() as conn:
        return [(r.integration_id, r.trigger, r.status) for r in conn.execute(integration_syncs.select()).all()]


def test_empty_states_say_how_to_connect(browser: FlaskClient, workspace: dict) -> None:
    r = browser.get("/dashboard/integrations")
    assert r.status_code == 200
    page = text(r.get_data(as_text=True))
    ws = workspace["workspace_id"]
    assert "No integration connected" in page
    assert f"flokit admin integrations connect --workspace {ws} --type TYPE --config FILE.json --check" in page
    assert "attribution_provider_a (Adjust)" in page and "android_store (Google Play)" in page
    assert "No ad account connected" in page
    assert f"flokit admin ad-accounts connect --workspace {ws} --platform PLATFORM --config FILE.json" in page


def test_the_list_shows_status_last_sync_stats_and_the_providers_error(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
        repo.start_sync(conn, sync_id=sync.id, run_id="run-1", instance_key=KEY)
        repo.finish_failure(conn, sync_id=sync.id, code="auth", message="Adjust: 401 invalid token", refused=True)
    page = text(browser.get("/dashboard/integrations").get_data(as_text=True))
    assert "attribution_provider_a (Adjust)" in page and integration_id in page
    assert "error Adjust: 401 invalid token" in page and "never" in page
    assert "failed auth: Adjust: 401 invalid token" in page
    assert "No integration connected" not in page


def test_the_detail_shows_stats_history_with_the_providers_error_and_no_polling_when_idle(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id, trigger="scheduled")
        repo.start_sync(conn, sync_id=sync.id, run_id="run-1", instance_key=KEY)
        repo.finish_failure(conn, sync_id=sync.id, code="rate_limited", message="429 slow down", refused=False)
    r = browser.get(f"/dashboard/integrations/{integration_id}")
    assert r.status_code == 200
    raw = r.get_data(as_text=True)
    page = text(raw)
    assert "sync_stats" in page and "Last 24 h 0" in page and "nothing has arrived yet" in page
    assert f"{sync.id} scheduled failed" in page and "rate_limited : 429 slow down" in page
    assert "api_token secret, ends in …cdef" in page and "adjust-token" not in raw
    assert POLL not in raw  # nothing pending: no polling
    assert 'data-dialog="dialog-sync"' in raw and "starts it at its next sensor tick" in page


def test_sync_now_queues_what_v1_queues_and_polls_while_pending(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    confirm = text(browser.get(f"/dashboard/integrations/{integration_id}/sync").get_data(as_text=True))
    assert "Sync now?" in confirm and "A manual sync is queued" in confirm
    r = browser.post(f"/dashboard/integrations/{integration_id}/sync", data={"csrf_token": token})
    assert r.status_code == 303
    [(_, trigger, status)] = syncs(db)
    assert (trigger, status) == ("manual", "queued")
    queued = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert POLL in queued and "queued" in text(queued)
    # v1 answers with the same pending sync: the dashboard queued exactly what v1 would have.
    v1 = browser.post(f"/v1/integrations/{integration_id}/sync", headers=bearer(workspace["api_key_read_write"]))
    assert v1.status_code == 202 and v1.json["sync_id"] in r.headers["Location"]
    # with htmx: the status part, saying nothing new was queued
    again = browser.post(f"/dashboard/integrations/{integration_id}/sync", data={"csrf_token": token}, headers=HTMX)
    assert again.status_code == 200 and "<html" not in again.get_data(as_text=True)
    assert "already pending, nothing new queued" in text(again.get_data(as_text=True))
    assert len(syncs(db)) == 1
    # the poll answers the status part while pending, and stops polling once the sync ended
    poll = browser.get(f"/dashboard/integrations/{integration_id}/status", headers=HTMX)
    assert poll.status_code == 200 and POLL in poll.get_data(as_text=True)
    with db.write() as conn:
        [pending] = [s for s in repo.sync_history(conn, integration_id=integration_id)]
        repo.start_sync(conn, sync_id=pending.id, run_id="run-2", instance_key=KEY)
    running = browser.get(f"/dashboard/integrations/{integration_id}/status", headers=HTMX).get_data(as_text=True)
    assert POLL in running and "running since" in text(running)
    with db.write() as conn:
        repo.finish_success(conn, sync_id=pending.id, records=12, earliest=None, state={})
    done = browser.get(f"/dashboard/integrations/{integration_id}/status", headers=HTMX).get_data(as_text=True)
    assert POLL not in done and "succeeded" in text(done) and "connected" in text(done)
    # the status address without htmx is the page
    assert browser.get(f"/dashboard/integrations/{integration_id}/status").status_code == 303


def test_sync_now_with_htmx_answers_202_with_the_new_pending_sync(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    r = browser.post(f"/dashboard/integrations/{integration_id}/sync", headers={**HTMX, "X-CSRFToken": token})
    page = r.get_data(as_text=True)
    assert r.status_code == 202 and page.lstrip().startswith('<div id="sync-status"') and POLL in page
    assert "queued just now" in text(page)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/repository.py")
def test_a_disconnected_integration_cannot_sync(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    with db.write() as conn:
        repo.disconnect(conn, integration_id=integration_id, actor="t")
    page = text(browser.get(f"/dashboard/integrations/{integration_id}").get_data(as_text=True))
    assert "Disconnected: it cannot sync" in page and "Sync now" not in page
    r = browser.post(f"/dashboard/integrations/{integration_id}/sync", data={"csrf_token": token})
    assert r.status_code == 409 and "is disconnected" in text(r.get_data(as_text=True))
    assert syncs(db) == []


def test_ad_accounts_list_and_registry_with_the_sandbox_labelled(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    account_id = connect_registry(db, workspace["workspace_id"], WORLD)
    page = text(browser.get("/dashboard/integrations").get_data(as_text=True))
    assert "sandbox: FloKit's own records, no ad platform is called" in page and account_id in page
    assert "No ad account connected" not in page
    r = browser.get(f"/dashboard/ad-accounts/{account_id}")
    assert r.status_code == 200
    detail = text(r.get_data(as_text=True))
    with db.read() as conn:
        objects = accounts.entities(conn, ad_account_id=account_id)
    campaign = next(e for e in objects if e.entity_type == "campaign" and e.daily_budget)
    assert campaign.name in detail and campaign.report_campaign in detail  # type: ignore[operator]
    assert f"{campaign.daily_budget / 100:.2f} USD/day" in detail  # type: ignore[operator]
    assert "actions change these rows and no ad platform is called" in detail
    assert f"{len(objects)} live" in detail


def test_another_workspaces_objects_are_404_pages(browser: FlaskClient, db: Database, token: str) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    theirs = connect(db, other["workspace_id"])
    account_id = connect_registry(db, other["workspace_id"], WORLD)
    for r in (
        browser.get(f"/dashboard/integrations/{theirs}"),
        browser.get(f"/dashboard/integrations/{theirs}/status", headers=HTMX),
        browser.get(f"/dashboard/integrations/{theirs}/sync"),
        browser.post(f"/dashboard/integrations/{theirs}/sync", data={"csrf_token": token}),
        browser.get(f"/dashboard/ad-accounts/{account_id}"),
        browser.get("/dashboard/integrations/int_nope"),
    ):
        assert r.status_code == 404 and r.mimetype == "text/html"
        assert "<h1>Not found</h1>" in r.get_data(as_text=True)
    assert syncs(db) == []
    assert "No integration connected" in text(browser.get("/dashboard/integrations").get_data(as_text=True))


def test_signed_out_and_csrf(client: FlaskClient, browser: FlaskClient, db: Database, workspace: dict) -> None:
    integration_id = connect(db, workspace["workspace_id"])
    r = browser.post(f"/dashboard/integrations/{integration_id}/sync")
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    r = browser.post(f"/dashboard/integrations/{integration_id}/sync", headers=HTMX)
    assert r.status_code == 400
    assert syncs(db) == []
    fresh = client.application.test_client()
    for path in ("/dashboard/integrations", f"/dashboard/integrations/{integration_id}", "/dashboard/ad-accounts/x"):
        assert fresh.get(path).status_code == 401
    assert fresh.post(f"/dashboard/integrations/{integration_id}/sync").status_code == 401
    assert syncs(db) == []
