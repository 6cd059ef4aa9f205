"""The dashboard's paywall pages over HTTP: list, live version and history, review and publish.

Publishes are read back through the gateway's config endpoint (what an app reads) and the audit
log; versions the executor published for an offer test are written through the executor's own
functions, so that the page's "origin" is what the ledger says.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from orchestration.actions.executor import EXECUTOR, finish_offer_test
from tests.support.actions import literal_content
from tests.support.paywalls import document, offer
from transforms import paywall
from warehouse import audit
from warehouse.actions import repository as actions_repo
from warehouse.actions.executions import record_intent, update
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.paywalls import configs
from warehouse.workspaces import revoke_app

HTMX = {"HX-Request": "true"}


def text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def doc(weights: list[float], active: bool = True) -> dict[str, Any]:
    return document(weights, active).model_dump(mode="json", exclude_none=True)


def publish(db: Database, app_id: str, raw: dict[str, Any], actor: str = "cli", paywall_id: str = "onboarding") -> int:
    with db.write() as conn:
        return configs.publish(
            conn, app_id=app_id, paywall_id=paywall_id, document=paywall.parse_document(raw), actor=actor
        ).version


def served(client: FlaskClient, app_id: str, paywall_id: str = "onboarding") -> Any:
    r = client.get(
        "/api/paywall/config", query_string={"app_id": app_id, "paywall_id": paywall_id}, headers={"x-user-id": "u-1"}
    )
    assert r.status_code == 200
    return r.json


def test_the_list_and_its_empty_state(browser: FlaskClient, db: Database, workspace: dict) -> None:
    empty = text(browser.get("/dashboard/paywalls").get_data(as_text=True))
    assert "No paywall published yet" in empty and "flokit admin paywalls publish --app" in empty
    assert "Publish a new paywall" in empty
    publish(db, workspace["app_id"], doc([1]))
    publish(db, workspace["app_id"], doc([1, 1]), actor="ops@example.com")
    r = browser.get("/dashboard/paywalls")
    assert r.status_code == 200
    page = text(r.get_data(as_text=True))
    assert "No paywall published yet" not in page
    assert "onboarding" in page and "2 of 2" in page and "ops@example.com" in page
    assert f'href="/dashboard/paywalls/{workspace["app_id"]}/onboarding"' in r.get_data(as_text=True)


def test_a_workspace_without_a_live_app_says_so(browser: FlaskClient, db: Database, workspace: dict) -> None:
    with db.write() as conn:
        revoke_app(conn, app_id=workspace["app_id"], actor="t")
    page = text(browser.get("/dashboard/paywalls").get_data(as_text=True))
    assert "no live app" in page and "Publish a new paywall" not in page


def test_open_leads_to_a_paywall_page_even_before_its_first_version(browser: FlaskClient, workspace: dict) -> None:
    app_id = workspace["app_id"]
    r = browser.get(f"/dashboard/paywalls/open?app_id={app_id}&paywall_id=promo")
    assert r.status_code == 303 and r.headers["Location"] == f"/dashboard/paywalls/{app_id}/promo"
    page = text(browser.get(r.headers["Location"]).get_data(as_text=True))
    assert "not published" in page and "fallback" in page and "Publish a new version" in page
    assert browser.get(f"/dashboard/paywalls/open?app_id={app_id}&paywall_id=").status_code == 400
    assert browser.get(f"/dashboard/paywalls/open?app_id={app_id}&paywall_id={'x' * 101}").status_code == 400
    assert browser.get("/dashboard/paywalls/open?app_id=app_nope&paywall_id=p").status_code == 404


def test_the_detail_shows_the_live_version_shares_and_history(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, doc([1], active=False))
    publish(db, app_id, doc([30, 70]), actor="ops@example.com")
    r = browser.get(f"/dashboard/paywalls/{app_id}/onboarding")
    assert r.status_code == 200
    page = text(r.get_data(as_text=True))
    assert "Version 2" in page and "by ops@example.com" in page and "active: traffic split by weight" in page
    assert "30.0 %" in page and "70.0 %" in page
    assert "experiment_active false → true" in page and "variant v1 added" in page and "first version" in page
    assert f"GET /api/paywall/config?app_id={app_id}&paywall_id=onboarding" in page
    raw = r.get_data(as_text=True)
    assert '<tr id="version-2">' in raw and '<tr id="version-1">' in raw
    # the form starts from the live document
    area = re.search(r'<textarea id="paywall-document"[^>]*>(.*?)</textarea>', raw, re.S)
    assert area and json.loads(html.unescape(area.group(1))) == doc([30, 70])


def test_review_lists_the_changes_then_publish_makes_the_next_version_live(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, doc([50, 50]))
    proposed = doc([20, 80])
    proposed["variants"][1]["offers"][0]["price_usd_cents"] = 999
    form = {"csrf_token": token, "base_version": "1", "document": json.dumps(proposed)}
    review = browser.post(f"/dashboard/paywalls/{app_id}/onboarding/review", data=form)
    assert review.status_code == 200
    page = text(review.get_data(as_text=True))
    assert "Publish version 2 of paywall onboarding?" in page
    for change in (
        "variant v0: traffic_weight 50.0 → 20.0",
        "variant v1: traffic_weight 50.0 → 80.0",
        "variant v1: offer pro_weekly price_usd_cents 699 → 999",
        "variant v0: share of traffic 50.0% → 20.0%",
    ):
        assert change in page, change
    with db.read() as conn:  # reviewing publishes nothing
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding").version == 1  # type: ignore[union-attr]

    done = browser.post(f"/dashboard/paywalls/{app_id}/onboarding/publish", data=form)
    assert done.status_code == 303
    assert done.headers["Location"] == f"/dashboard/paywalls/{app_id}/onboarding?published=2"
    assert "Version 2 published and live" in text(browser.get(done.headers["Location"]).get_data(as_text=True))
    body = served(browser, app_id)
    assert body["version"] == 2 and body["fallbackUsed"] is False
    with db.read() as conn:
        live = configs.live(conn, app_id=app_id, paywall_id="onboarding")
        trail = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=app_id)
    assert live is not None and live.published_by == "maya@example.com"
    assert live.document.model_dump(mode="json", exclude_none=True) == proposed
    assert [(e["action"], e["actor"], e["detail"]["version"]) for e in trail if e["action"] == "paywall.published"][
        -1
    ] == ("paywall.published", "maya@example.com", 2)


def test_the_first_version_publishes_over_the_fallback(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    app_id = workspace["app_id"]
    with db.read() as conn:  # (not asked of the gateway here: each worker keeps an answer for a second)
        assert configs.live(conn, app_id=app_id, paywall_id="promo") is None
    form = {"csrf_token": token, "base_version": "0", "document": json.dumps(doc([1], active=False))}
    review = text(browser.post(f"/dashboard/paywalls/{app_id}/promo/review", data=form).get_data(as_text=True))
    assert "first version: the gateway serves it instead of the fallback" in review
    assert browser.post(f"/dashboard/paywalls/{app_id}/promo/publish", data=form).status_code == 303
    assert served(browser, app_id, "promo")["version"] == 1


@pytest.mark.parametrize(
    ("raw", "where", "message"),
    [
        ("{not json", "document", "not valid JSON"),
        (json.dumps({"variants": []}), "variants", "at least 1 item"),
        (
            json.dumps({"experiment_active": True, "variants": [doc([0], active=False)["variants"][0]]}),
            "document",
            "an active experiment needs at least one variant with traffic_weight > 0",
        ),
        (
            json.dumps({"variants": [{"variant_id": "a", "layout": "x", "offers": [offer() | {"currency": "usd"}]}]}),
            "variants.0.offers.0.currency",
            "should match pattern",
        ),
        (json.dumps(doc([1]) | {"extra": 1}), "extra", "Extra inputs are not permitted"),
    ],
)
def test_an_invalid_document_is_refused_beside_the_field_with_the_clis_reasons(
    browser: FlaskClient, db: Database, workspace: dict, token: str, raw: str, where: str, message: str
) -> None:
    app_id = workspace["app_id"]
    for step in ("review", "publish"):
        r = browser.post(
            f"/dashboard/paywalls/{app_id}/onboarding/{step}",
            data={"csrf_token": token, "base_version": "0", "document": raw},
        )
        assert r.status_code == 400
        page = r.get_data(as_text=True)
        assert (
            'aria-invalid="true"' in page and 'aria-describedby="paywall-document-help paywall-document-error"' in page
        )
        assert f"<code>{where}</code>" in page and message in html.unescape(page)
        assert raw in html.unescape(page)  # what was typed is kept
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding") is None
    if raw.startswith("{") and "}" in raw:  # the CLI refuses it too, for the reason shown first
        with pytest.raises(paywall.InvalidDocument, match=re.escape(where)):
            paywall.parse_document(json.loads(raw))


def test_with_htmx_a_refusal_replaces_the_page_part_and_the_review_is_the_dialogs_body(
    browser: FlaskClient, workspace: dict, token: str
) -> None:
    app_id = workspace["app_id"]
    bad = browser.post(
        f"/dashboard/paywalls/{app_id}/onboarding/review",
        data={"csrf_token": token, "base_version": "0", "document": "[]"},
        headers=HTMX,
    )
    assert bad.status_code == 400
    assert (bad.headers["HX-Retarget"], bad.headers["HX-Reselect"]) == ("#paywall-page", "#paywall-page")
    good = browser.post(
        f"/dashboard/paywalls/{app_id}/onboarding/review",
        data={"csrf_token": token, "base_version": "0", "document": json.dumps(doc([1]))},
        headers=HTMX,
    )
    page = good.get_data(as_text=True)
    assert good.status_code == 200 and '<div id="publish-review">' in page and "data-close" in page


def test_a_publish_reviewed_against_an_older_version_is_a_409_showing_whats_live(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, doc([1]))
    form = {"csrf_token": token, "base_version": "1", "document": json.dumps(doc([1, 1]))}
    assert browser.post(f"/dashboard/paywalls/{app_id}/onboarding/review", data=form).status_code == 200
    publish(db, app_id, doc([2]), actor="other@example.com")  # someone else, meanwhile
    for step in ("publish", "review"):
        r = browser.post(f"/dashboard/paywalls/{app_id}/onboarding/{step}", data=form)
        assert r.status_code == 409
        page = text(r.get_data(as_text=True))
        assert "Someone published meanwhile: version 2 by other@example.com" in page
    with db.read() as conn:
        assert configs.live(conn, app_id=app_id, paywall_id="onboarding").version == 2  # type: ignore[union-attr]


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: paywalls/history.py")
def test_versions_the_executor_published_for_an_offer_test_name_the_action(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    """The ledger rows the executor writes (`_apply_offer_test`) and its own `finish_offer_test`."""
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    base = doc([1], active=False)
    base["variants"][0]["offers"].append(offer("pro_yearly"))
    publish(db, app_id, base, actor="ops@example.com")
    with db.write() as conn:
        action = actions_repo.create_action(
            conn,
            workspace_id=ws,
            action_type="offer_test",
            content=literal_content("offer_test"),
            actor="flokit engine",
            origin="engine",
            parameters={
                "paywall_id": "onboarding",
                "country": "US",
                "control_offer": "pro_weekly",
                "treatment_offer": "pro_yearly",
            },
        )
        row = record_intent(
            conn,
            action_id=action.id,
            workspace_id=ws,
            ad_account_id=None,
            kind="apply",
            leg=1,
            platform="flokit",
            object_type="paywall",
            object_id=f"{app_id}:onboarding",
            field="paywall_config",
            before={"version": 1},
            after={"version": 2, "split": 0.5},
        )
        test = configs.publish(
            conn,
            app_id=app_id,
            paywall_id="onboarding",
            document=paywall.parse_document(doc([1, 1])),
            actor=EXECUTOR,
        )
        update(conn, row.id, state="verified", attempted=True, response=f"published version {test.version}")
    finish_offer_test(db, action, publish="control")
    page = text(browser.get(f"/dashboard/paywalls/{app_id}/onboarding").get_data(as_text=True))
    assert "growth action, offer test started: Test offer_test" in page
    assert "growth action, offer test ended (the control published back): Test offer_test" in page
    assert f'href="/dashboard/actions/{action.id}"' in browser.get(f"/dashboard/paywalls/{app_id}/onboarding").get_data(
        as_text=True
    )
    assert "flokit executor" in page


def test_another_workspaces_app_is_a_404_page(browser: FlaskClient, db: Database, token: str) -> None:
    with db.write() as conn:
        other = bootstrap(conn, name="Other Co")
    publish(db, other["app_id"], doc([1]))
    form = {"csrf_token": token, "base_version": "1", "document": json.dumps(doc([1, 1]))}
    for r in (
        browser.get(f"/dashboard/paywalls/{other['app_id']}/onboarding"),
        browser.get(f"/dashboard/paywalls/open?app_id={other['app_id']}&paywall_id=onboarding"),
        browser.post(f"/dashboard/paywalls/{other['app_id']}/onboarding/review", data=form),
        browser.post(f"/dashboard/paywalls/{other['app_id']}/onboarding/publish", data=form),
    ):
        assert r.status_code == 404 and r.mimetype == "text/html"
        assert "<h1>Not found</h1>" in r.get_data(as_text=True)
    assert "No paywall published yet" in text(browser.get("/dashboard/paywalls").get_data(as_text=True))
    with db.read() as conn:
        assert configs.live(conn, app_id=other["app_id"], paywall_id="onboarding").version == 1  # type: ignore[union-attr]


def test_signed_out_and_csrf(client: FlaskClient, browser: FlaskClient, workspace: dict) -> None:
    app_id = workspace["app_id"]
    form = {"base_version": "0", "document": json.dumps(doc([1]))}
    for step in ("review", "publish"):
        r = browser.post(f"/dashboard/paywalls/{app_id}/onboarding/{step}", data=form)
        assert r.status_code == 400 and "CSRF" in r.get_data(as_text=True)
    assert served(browser, app_id)["fallbackUsed"] is True
    fresh = client.application.test_client()
    for path in ("/dashboard/paywalls", f"/dashboard/paywalls/{app_id}/onboarding"):
        r = fresh.get(path)
        assert r.status_code == 401 and "flokit admin login-link" in r.get_data(as_text=True)
    assert fresh.post(f"/dashboard/paywalls/{app_id}/onboarding/publish", data=form).status_code == 401


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: paywalls/history.py, dashboard/sessions.py")
def test_a_revoked_apps_paywall_keeps_its_history_and_refuses_a_publish(
    browser: FlaskClient, db: Database, workspace: dict, token: str
) -> None:
    app_id = workspace["app_id"]
    publish(db, app_id, doc([1]))
    with db.write() as conn:
        revoke_app(conn, app_id=app_id, actor="t")
    page = text(browser.get(f"/dashboard/paywalls/{app_id}/onboarding").get_data(as_text=True))
    assert "app revoked: the gateway serves none of its paywalls" in page and "first version" in page
    assert "app revoked: not served" in text(browser.get("/dashboard/paywalls").get_data(as_text=True))
    form = {"csrf_token": token, "base_version": "0", "document": json.dumps(doc([1, 1]))}
    r = browser.post(f"/dashboard/paywalls/{app_id}/onboarding/publish", data=form)
    assert r.status_code == 409 and "is revoked" in text(r.get_data(as_text=True))


def test_shares_are_relative_and_the_first_variant_takes_all_without_an_experiment() -> None:
    assert paywall.shares(document([1, 1])) == paywall.shares(document([50, 50])) == {"v0": 0.5, "v1": 0.5}
    assert paywall.shares(document([0, 3, 1])) == {"v0": 0.0, "v1": 0.75, "v2": 0.25}
    assert paywall.shares(document([0, 3], active=False)) == {"v0": 1.0, "v1": 0.0}


def test_changes_name_every_difference_and_problems_list_every_reason() -> None:
    live = document([1, 1])
    swapped = paywall.parse_document(
        {"experiment_active": False, "variants": [v.model_dump() for v in reversed(live.variants)]}
    )
    said = paywall.changes(live, swapped)
    assert "experiment_active true → false" in said
    assert "first variant (everyone's when no experiment is active) v0 → v1" in said
    assert "variant v1: share of traffic 50.0% → 100.0%" in said
    assert paywall.changes(live, live) == []
    raw = {"variants": [{"variant_id": "a", "layout": "", "offers": []}], "extra": 1}
    problems = paywall.document_problems(raw)
    assert [where for where, _ in problems] == [
        "variants.0.layout",
        "variants.0.offers",
        "variants.0.traffic_weight",
        "extra",
    ]
    with pytest.raises(paywall.InvalidDocument, match=r"^variants\.0\.layout: "):  # the CLI names the first
        paywall.parse_document(raw)
    assert paywall.document_problems(doc([1])) == []
