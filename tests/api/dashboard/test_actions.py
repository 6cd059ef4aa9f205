"""The dashboard's action queue and detail over HTTP: filters, pages, approve/reject/roll back.

Actions are moved through the real repository (tests/support/actions.py); what the dashboard did
is read back through v1 (`GET /v1/actions/<id>`), the API a client would read it with.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from flask.testing import FlaskClient

from tests.support import bearer
from tests.support.actions import literal_content, seed_queue
from tests.support.dashboard import OPERATOR
from tests.support.engine import WORLD, connect_registry
from transforms.actions.consequences import approve_consequence, impact_sentence, rollback_consequence
from warehouse.actions import repository as repo
from warehouse.actions.repository import Action
from warehouse.adaccounts.repository import list_accounts
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, utcnow

HTMX = {"HX-Request": "true"}
EN = "\N{EN DASH}"  # ranges read "1-25 of 212" with an en dash


@pytest.fixture
def seeded(db: Database, workspace: dict) -> list[Action]:
    """The eight actions of tests/support/actions.py QUEUE, one or two in each status."""
    with db.write() as conn:
        return seed_queue(conn, workspace_id=workspace["workspace_id"])


@pytest.fixture
def queue(seeded: list[Action]) -> dict[str, Action]:
    """The first seeded action of each status (the newer of the two ready ones)."""
    first: dict[str, Action] = {}
    for a in seeded:
        first.setdefault(a.status, a)
    return first


def v1_action(client: FlaskClient, workspace: dict, action_id: str) -> dict:
    r = client.get(f"/v1/actions/{action_id}", headers=bearer(workspace["api_key_read_only"]))
    assert r.status_code == 200
    return r.json["action"]


def text(html: str) -> str:
    """The page's text with tags and runs of spaces removed, for phrases split by markup."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def row_ids(html: str) -> list[str]:
    return re.findall(r'<tr id="row-([a-z0-9_]+)"', html)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/repository.py")
def test_the_queue_lists_newest_first_with_filters_and_pages(browser: FlaskClient, seeded: list[Action]) -> None:
    page = browser.get("/dashboard/actions").get_data(as_text=True)
    newest_first = [a.id for a in sorted(seeded, key=lambda a: a.created_at, reverse=True)]
    assert row_ids(page) == newest_first
    assert f"1{EN}8 of 8" in page and 'rel="next"' not in page
    assert 'class="badge status-rolled_back">rolled back<' in page
    assert 'draft — guardrail "minimum_cohort_size" fails' in html.unescape(page)

    ready = browser.get("/dashboard/actions?status=ready").get_data(as_text=True)
    assert row_ids(ready) == [a.id for a in seeded if a.status == "ready"] and f"1{EN}2 of 2" in ready
    assert "Clear filters" in ready
    assert '<option value="ready" selected>' in ready
    pauses = browser.get("/dashboard/actions?type=creative_pause").get_data(as_text=True)
    assert set(row_ids(pauses)) == {a.id for a in seeded if a.type == "creative_pause"}
    both = browser.get("/dashboard/actions?status=completed&type=budget_shift").get_data(as_text=True)
    assert row_ids(both) == [a.id for a in seeded if a.status == "completed"]

    first = browser.get("/dashboard/actions?limit=3").get_data(as_text=True)
    assert row_ids(first) == newest_first[:3] and f"1{EN}3 of 8" in first
    assert 'href="/dashboard/actions?limit=3&amp;offset=3" rel="next"' in first and 'rel="prev"' not in first
    middle = browser.get("/dashboard/actions?limit=3&offset=3").get_data(as_text=True)
    assert row_ids(middle) == newest_first[3:6] and f"4{EN}6 of 8" in middle
    assert 'href="/dashboard/actions?limit=3&amp;offset=0" rel="prev"' in middle
    last = browser.get("/dashboard/actions?limit=3&offset=6").get_data(as_text=True)
    assert row_ids(last) == newest_first[6:] and f"7{EN}8 of 8" in last and 'rel="next"' not in last


@pytest.mark.parametrize("query", ["status=open", "type=banner", "limit=101", "limit=0", "offset=-1"])
def test_a_filter_outside_the_vocabulary_is_a_400_page(browser: FlaskClient, query: str) -> None:
    r = browser.get(f"/dashboard/actions?{query}")
    assert r.status_code == 400 and r.mimetype == "text/html" and "<h1>Bad request</h1>" in r.get_data(as_text=True)


def test_two_empty_states_nothing_yet_and_nothing_for_these_filters(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    empty = text(browser.get("/dashboard/actions").get_data(as_text=True))
    assert "No actions yet" in empty and "flokit refresh" in empty and "Clear filters" not in empty
    with db.write() as conn:
        seed_queue(conn, workspace_id=workspace["workspace_id"])
        repo.transition(
            conn,
            workspace_id=workspace["workspace_id"],
            action_id=repo.list_actions(conn, workspace_id=workspace["workspace_id"], status="draft")[0][0].id,
            trigger="reject",
            actor="t",
        )
    none = text(browser.get("/dashboard/actions?status=draft").get_data(as_text=True))
    assert "No actions match these filters" in none and "Clear filters" in none and "No actions yet" not in none


def test_the_detail_shows_parameters_signals_checks_conditions_and_history(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    now = utcnow()
    with db.write() as conn:
        action = repo.create_action(
            conn,
            workspace_id=ws,
            action_type="budget_shift",
            content=literal_content("budget_shift", guardrails_pass=False),
            actor="flokit engine",
            origin="engine",
            at=now - timedelta(hours=2),
            parameters={
                "from_campaign": "Brand",
                "to_campaign": "Prospecting",
                "amount_per_day": 50.0,
                "currency": "USD",
            },
        )
        repo.record_evaluation(
            conn,
            action_id=action.id,
            kind="revalidation",
            outcome="failed",
            detail={"summary": "Test re-evaluation: the cohort is still small"},
            engine_version="engine-test",
            data_as_of=None,
            at=now - timedelta(hours=1),
        )
    r = browser.get(f"/dashboard/actions/{action.id}")
    assert r.status_code == 200
    page = text(r.get_data(as_text=True))
    assert "<title>Test budget_shift · FloKit</title>" in r.get_data(as_text=True)
    for shown in (
        "from_campaign Brand",
        "amount_per_day 50.0",
        "Test signal 1",
        "minimum_cohort_size fail test cohort",
        "statistical_confidence pass test confidence",
        "Test condition",
        "test_metric: up by 0.1.",
        "created as draft",
        "flokit engine",
        "Test re-evaluation: the cohort is still small",
    ):
        assert shown in page, shown
    # Approve is shown disabled, with why; reject is offered; no rollback from draft.
    html = r.get_data(as_text=True)
    assert re.search(r'<button type="button" disabled aria-describedby="why-approve-[^"]+">Approve</button>', html)
    assert "A guardrail check fails: minimum_cohort_size" in page
    assert f'data-dialog="dialog-reject-{action.id}"' in html and "Roll back" not in page


def test_another_workspaces_action_is_a_404_page(browser: FlaskClient, db: Database, token: str) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
        [theirs, *_] = seed_queue(conn, workspace_id=other["workspace_id"])
    for r in (
        browser.get(f"/dashboard/actions/{theirs.id}"),
        browser.get(f"/dashboard/actions/{theirs.id}/approve"),
        browser.post(f"/dashboard/actions/{theirs.id}/approve", data={"csrf_token": token}),
    ):
        assert r.status_code == 404 and r.mimetype == "text/html"
        assert "<h1>Not found</h1>" in r.get_data(as_text=True)
    with db.read() as conn:
        assert repo.get_action(conn, workspace_id=other["workspace_id"], action_id=theirs.id).status == "ready"


def test_approve_with_a_note_records_the_operator_as_actor(
    browser: FlaskClient, workspace: dict, queue: dict[str, Action], token: str
) -> None:
    ready = queue["ready"]
    confirm = text(browser.get(f"/dashboard/actions/{ready.id}/approve?next=/dashboard/actions").get_data(as_text=True))
    assert "Approve? FloKit has nothing to apply for this action" in confirm and "Note (optional)" in confirm
    r = browser.post(
        f"/dashboard/actions/{ready.id}/approve",
        data={"csrf_token": token, "note": "Looks right", "next": "/dashboard/actions?status=ready"},
    )
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/actions?status=ready"
    detail = v1_action(browser, workspace, ready.id)
    assert detail["status"] == "approved" and detail["approved_by"] == OPERATOR
    last = detail["history"][-1]
    assert (last["trigger"], last["actor"], last["note"]) == ("approve", OPERATOR, "Looks right")


def test_reject_needs_a_reason_shown_beside_the_field(
    browser: FlaskClient, workspace: dict, queue: dict[str, Action], token: str
) -> None:
    draft = queue["draft"]
    r = browser.post(f"/dashboard/actions/{draft.id}/reject", data={"csrf_token": token, "reason": "  "})
    assert r.status_code == 400
    html = r.get_data(as_text=True)
    field = f"form-reject-{draft.id}-reason"
    assert f'id="{field}" name="reason"' in html and 'aria-invalid="true"' in html
    assert f'aria-describedby="form-reject-{draft.id}-error"' in html and "Give a reason" in html
    assert v1_action(browser, workspace, draft.id)["status"] == "draft"

    r = browser.post(f"/dashboard/actions/{draft.id}/reject", data={"csrf_token": token, "reason": "Too small"})
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/actions"
    detail = v1_action(browser, workspace, draft.id)
    assert detail["status"] == "rejected"
    assert (detail["history"][-1]["actor"], detail["history"][-1]["note"]) == (OPERATOR, "Too small")


def test_rollback_only_where_the_state_machine_allows(
    browser: FlaskClient, workspace: dict, queue: dict[str, Action], token: str
) -> None:
    running = queue["running"]  # a creative pause
    raw = browser.get(f"/dashboard/actions/{running.id}").get_data(as_text=True)
    page = text(raw)
    assert f'data-dialog="dialog-rollback-{running.id}"' in raw and "dialog-approve-" not in raw
    assert "FloKit applied nothing for it, so nothing is written on a platform" in page  # no parameters
    r = browser.post(f"/dashboard/actions/{running.id}/rollback", data={"csrf_token": token})
    assert r.status_code == 303
    detail = v1_action(browser, workspace, running.id)
    assert detail["status"] == "rolled_back" and detail["history"][-1]["actor"] == OPERATOR
    # An offer test is never rolled back, and an approved budget shift not yet: no button.
    for status in ("rejected", "approved"):
        html = browser.get(f"/dashboard/actions/{queue[status].id}").get_data(as_text=True)
        assert "Roll back" not in html, status


def test_a_conflict_shows_who_acted_first_and_the_current_state(
    browser: FlaskClient, workspace: dict, queue: dict[str, Action], token: str
) -> None:
    approved = queue["approved"]
    r = browser.post(f"/dashboard/actions/{approved.id}/approve", data={"csrf_token": token})
    assert r.status_code == 409 and r.mimetype == "text/html"
    page = text(r.get_data(as_text=True))
    assert "Someone acted first: this action is already approved by tester@example.com" in page
    assert "Status approved" in page
    assert v1_action(browser, workspace, approved.id)["approved_by"] == "tester@example.com"


def test_with_htmx_the_answer_is_the_updated_row(
    browser: FlaskClient, workspace: dict, queue: dict[str, Action], token: str
) -> None:
    ready, approved = queue["ready"], queue["approved"]
    form = {"csrf_token": token, "fragment": "row", "next": "/dashboard/actions"}
    r = browser.post(f"/dashboard/actions/{ready.id}/approve", data=form, headers=HTMX)
    assert r.status_code == 200
    html = r.get_data(as_text=True)
    assert html.lstrip().startswith(f'<tr id="row-{ready.id}" tabindex="-1">') and "<html" not in html
    assert 'class="badge status-approved">approved<' in html and OPERATOR in html

    r = browser.post(f"/dashboard/actions/{approved.id}/reject", data={**form, "reason": "no"}, headers=HTMX)
    assert r.status_code == 409 and row_ids(r.get_data(as_text=True)) == [approved.id]
    assert "already approved by tester@example.com" in r.get_data(as_text=True)

    draft = queue["draft"]
    r = browser.post(f"/dashboard/actions/{draft.id}/reject", data=form, headers={**HTMX, "X-CSRFToken": token})
    assert r.status_code == 400 and r.headers["HX-Retarget"] == f"#form-reject-{draft.id}"
    assert 'aria-invalid="true"' in r.get_data(as_text=True)

    r = browser.post(
        f"/dashboard/actions/{draft.id}/reject", data={**form, "fragment": "detail", "reason": "x"}, headers=HTMX
    )
    assert r.status_code == 200 and 'id="action-detail"' in r.get_data(as_text=True)
    assert v1_action(browser, workspace, draft.id)["status"] == "rejected"


def test_the_csrf_header_alone_is_enough_for_htmx(browser: FlaskClient, queue: dict[str, Action], token: str) -> None:
    ready = queue["ready"]
    r = browser.post(f"/dashboard/actions/{ready.id}/approve", data={"fragment": "row"}, headers=HTMX)
    assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    r = browser.post(
        f"/dashboard/actions/{ready.id}/approve", data={"fragment": "row"}, headers={**HTMX, "X-CSRFToken": token}
    )
    assert r.status_code == 200


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: actions/timeline.py")
def test_the_approve_dialog_names_the_ad_account_whose_registry_holds_the_campaigns(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    connect_registry(db, ws, WORLD)
    with db.read() as conn:
        [account] = list_accounts(conn, workspace_id=ws)
    with db.write() as conn:
        action = repo.create_action(
            conn,
            workspace_id=ws,
            action_type="budget_shift",
            content=literal_content("budget_shift"),
            actor="flokit engine",
            origin="engine",
            parameters={"from_campaign": "slow", "to_campaign": "fast", "amount_per_day": 20.0, "currency": "USD"},
        )
    page = text(html.unescape(browser.get("/dashboard/actions").get_data(as_text=True)))
    assert (
        "The executor moves 20.00 USD a day of budget from campaign slow to campaign fast "
        f"on the ad account {account.name}, after re-reading the live budgets." in page
    )
    assert f"dialog-approve-{action.id}" in browser.get(f"/dashboard/actions/{action.id}").get_data(as_text=True)


def test_consequences_name_the_ad_account_and_what_is_reverted() -> None:
    shift = {"from_campaign": "Brand", "to_campaign": "Prospecting", "amount_per_day": 50.0, "currency": "USD"}
    said = approve_consequence("budget_shift", shift, ["Sandbox ads"])
    assert "moves 50.00 USD a day" in said and "from campaign Brand to campaign Prospecting" in said
    assert "on the ad account Sandbox ads" in said
    assert "none is connected" in approve_consequence("creative_pause", {"creative": "c", "campaign": "k"}, [])
    assert "paywall onboarding" in approve_consequence(
        "offer_test", {"paywall_id": "onboarding", "country": "US", "control_offer": "a", "treatment_offer": "b"}, []
    )
    undo = rollback_consequence("budget_shift", shift, ["Sandbox ads"])
    assert "writes back the daily budgets" in undo and "left as they set it" in undo


def test_expected_impact_reads_in_the_metric_s_unit() -> None:
    """ROAS changes are plain ratios; rate changes are percentage points, never a raw fraction."""
    roas = impact_sentence({"metric": "roas_30d", "direction": "increase", "magnitude": 0.012345})
    assert roas == "Day-30 ROAS of the managed spend up by about 0.012 (revenue per unit of spend; roas_30d)."
    rate = impact_sentence({"metric": "paid_conversion_rate", "direction": "increase", "magnitude": 0.0412})
    assert rate.startswith("Paid conversion on the paywall in this country up by about 4.12 percentage points over")
    assert "trial-to-paid conversion rate down by about 0.50 percentage points" in impact_sentence(
        {"metric": "trial_conversion_rate", "direction": "decrease", "magnitude": 0.005}
    )
    none = {"metric": "not_estimated", "direction": "not_estimated", "magnitude": 0}
    assert impact_sentence(none).startswith("Not estimated")
