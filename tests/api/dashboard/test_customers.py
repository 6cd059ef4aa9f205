"""The dashboard's Customers pages over HTTP (issue 34): the search, the customer page, promotional
access granted and ended through CSRF-protected forms, and the refusals, as a support agent meets them.

Purchases arrive as in production (a signed generic-subscription webhook, a store's statement to
the ledger); what the app would then read is asked of `GET /api/paywall/entitlement`, and who did
what of the audit log.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from tests.support.dashboard import OPERATOR, csrf_of
from tests.support.entitlements import fact, statement
from tests.support.notifications import SUBSCRIPTION, iso, post, purchase
from tests.support.provider_notifications import KEY, entitlement
from warehouse import audit
from warehouse import customers as repo
from warehouse.db import Database, utcnow
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.entitlements.tables import entitlement_grants
from warehouse.settings import Settings
from warehouse.workspaces import create_app

BOTH = pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: customers.py (the page's one read, grants)")


@pytest.fixture
def settings(database_url: str, tmp_path: Any) -> Settings:
    """The instance key seals the generic webhook's secret and signs the dashboard's cookie."""
    return Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=KEY)


@pytest.fixture
def secret(db: Database, workspace: dict[str, Any]) -> str:
    with db.write() as conn:
        made = set_stores(
            conn, app_id=workspace["app_id"], update=StoresUpdate(new_generic_secret=True), instance_key=KEY
        ).generic_secret
    assert made is not None
    return made


def text(page: str) -> str:
    return html.unescape(" ".join(re.sub(r"<[^>]+>", " ", page).split()))


def section(page: str, element_id: str) -> str:
    """The visible text of the element with this id (a table, a form), up to its closing tag."""
    start = page.index(f'id="{element_id}"')
    tag = page.rfind("<", 0, start)
    name = page[tag + 1 : start].split()[0]
    return text(page[tag : page.index(f"</{name}>", start)])


def grants_count(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(entitlement_grants)).scalar_one())


def customer_url(workspace: dict[str, Any], user: str) -> str:
    return f"/dashboard/customers/{user}?app_id={workspace['app_id']}"


def grant_form(token: str, **fields: str) -> dict[str, str]:
    return {"csrf_token": token, "product_id": "pro_monthly", "duration": "P1M", "reason": "ticket 42"} | fields


@BOTH
def test_a_search_by_purchase_id_opens_the_customer_with_purchases_money_and_timeline(
    browser: FlaskClient, db: Database, workspace: dict, secret: str
) -> None:
    start = datetime.now(UTC) - timedelta(minutes=5)
    assert post(browser, SUBSCRIPTION, workspace["app_id"], purchase(occurred_at=iso(start)), secret).status_code == 200

    search = browser.get("/dashboard/customers")
    body = search.get_data(as_text=True)
    assert search.status_code == 200 and 'aria-current="page">Customers<' in body
    assert 'name="query"' in body

    found = browser.get("/dashboard/customers", query_string={"query": " sub_9 "})  # pasted with blanks
    assert found.status_code == 303
    assert found.headers["Location"] == f"/dashboard/customers/user-7?app_id={workspace['app_id']}"

    shown = browser.get(found.headers["Location"])
    assert shown.status_code == 200
    page = shown.get_data(as_text=True)
    facts = section(page, "customer-facts")
    assert workspace["app_id"] in facts and "UTC" in facts  # first and last seen
    entitlements = section(page, "entitlements")
    assert "pro_monthly" in entitlements and "active" in entitlements and "generic" in entitlements
    assert "yes" in entitlements  # will renew
    assert 'id="open-end-' not in page  # a store's purchase has no End button
    purchase_text = section(page, "purchase-1")
    assert "sub_9" in purchase_text and "active" in purchase_text
    # The amount as paid and in the workspace's reporting currency (USD), at the day's ECB rate.
    assert "9.99 EUR" in purchase_text and re.search(r"In USD .* \d+\.\d\d USD", purchase_text), purchase_text
    timeline = section(page, "timeline")
    assert "generic notification applied" in timeline and "generic states pro_monthly: active" in timeline


@BOTH
def test_several_hits_are_listed_with_what_matched_and_none_offers_the_user_id(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    # "shared-1" is one customer's user id and another customer's App Store purchase.
    statement(db, workspace, fact("shared-1", user_hint="apple-user"))
    with db.write() as conn:
        repo.grant_promotional(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id="shared-1",
            product_id="pro", ends_at=utcnow() + timedelta(days=3), reason="vip", actor="test",
        )  # fmt: skip
    r = browser.get("/dashboard/customers", query_string={"query": "shared-1"})
    assert r.status_code == 200
    results = section(r.get_data(as_text=True), "search-results")
    assert "shared-1 " + workspace["app_id"] + " user id" in results
    assert "apple-user " + workspace["app_id"] + " purchase id" in results

    none = browser.get("/dashboard/customers", query_string={"query": "nobody-here"})
    assert none.status_code == 200
    body = none.get_data(as_text=True)
    assert "No customer with the id nobody-here" in text(body)
    assert 'href="/dashboard/customers/nobody-here"' in body


def test_an_empty_or_too_long_query_is_refused_beside_the_field(browser: FlaskClient) -> None:
    for query, words in (("", "Query must not be empty."), ("   ", "Query must not be empty."),
                         ("x" * 513, "Query must be at most 512 characters.")):  # fmt: skip
        r = browser.get("/dashboard/customers", query_string={"query": query})
        assert r.status_code == 400 and r.mimetype == "text/html"
        page = r.get_data(as_text=True)
        assert f'<small id="customer-query-error" class="field-error">{words}</small>' in page
        assert 'aria-invalid="true"' in page


@BOTH
def test_grant_then_end_promotional_access_audited_as_the_operator(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    applied = statement(db, workspace, fact("1000001", user_hint="user-7"))
    page = browser.get(customer_url(workspace, "user-7")).get_data(as_text=True)
    assert "Grant promotional access" in page and f'id="open-end-{applied.grant_id}"' not in page
    token = csrf_of(page)

    r = browser.post(f"/dashboard/customers/user-7/grant?app_id={workspace['app_id']}",
                     data=grant_form(token, product_id="gold"))  # fmt: skip
    assert r.status_code == 303, r.get_data(as_text=True)
    assert parse_qs(urlsplit(r.headers["Location"]).query) == {"app_id": [workspace["app_id"]], "done": ["granted"]}
    assert entitlement(browser, workspace, "user-7")["active"] is True

    shown = browser.get(r.headers["Location"]).get_data(as_text=True)
    assert "Promotional access granted" in text(shown)
    with db.read() as conn:
        [promo] = [
            gr for gr in repo.grants(conn, app_id=workspace["app_id"], user_id="user-7") if gr.product_id == "gold"
        ]
    row = section(shown, f"grant-{promo.id}")
    assert "active" in row and "promotional" in row and "End" in row
    assert f'id="open-end-{promo.id}"' in shown
    timeline = section(shown, "timeline")
    assert "promotional access to gold granted until" in timeline and f"by {OPERATOR}: ticket 42" in timeline

    ended = browser.post(f"/dashboard/customers/user-7/entitlements/{promo.id}/end",
                         data={"csrf_token": token, "reason": "refund issued"})  # fmt: skip
    assert ended.status_code == 303 and "done=ended" in ended.headers["Location"]
    after = browser.get(ended.headers["Location"]).get_data(as_text=True)
    assert "inactive" in section(after, f"grant-{promo.id}") and f'id="open-end-{promo.id}"' not in after
    assert f"promotional access to gold ended by {OPERATOR}: refund issued" in section(after, "timeline")
    with db.read() as conn:
        logged = audit.entries(conn, workspace_id=workspace["workspace_id"], subject_id=promo.id)
    assert [(e["action"], e["actor"], e["detail"]["reason"]) for e in logged] == [
        ("customer.entitlement_granted", OPERATOR, "ticket 42"),
        ("customer.entitlement_ended", OPERATOR, "refund issued"),
    ]
    # The store's purchase still gives access; it cannot be ended here.
    store = browser.post(f"/dashboard/customers/user-7/entitlements/{applied.grant_id}/end", data={"csrf_token": token})
    assert store.status_code == 409 and store.mimetype == "text/html"
    assert "only its store can end it" in text(store.get_data(as_text=True))


def test_without_the_csrf_token_nothing_is_granted_or_ended(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    with db.write() as conn:
        promo = repo.grant_promotional(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id="user-7",
            product_id="pro", ends_at=utcnow() + timedelta(days=3), reason="vip", actor="test",
        )  # fmt: skip
    refused = browser.post(f"/dashboard/customers/user-7/grant?app_id={workspace['app_id']}",
                           data={"product_id": "p", "duration": "P7D", "reason": "r"})  # fmt: skip
    assert refused.status_code == 400 and refused.mimetype == "text/html"
    assert grants_count(db) == 1
    wrong = browser.post(f"/dashboard/customers/user-7/entitlements/{promo.id}/end", data={"csrf_token": "forged"})
    assert wrong.status_code == 400
    assert entitlement(browser, workspace, "user-7")["active"] is True


def test_refused_fields_are_shown_beside_them_and_nothing_is_granted(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    statement(db, workspace, fact("1000001", user_hint="user-7"))
    token = csrf_of(browser.get(customer_url(workspace, "user-7")).get_data(as_text=True))
    past = (datetime.now(UTC) - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    soon = (datetime.now(UTC) + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    for fields, field_id, words in (
        ({"product_id": ""}, "grant-product", "Give the product id to grant."),
        ({"reason": "  "}, "grant-reason", "Give a reason: it is kept in the audit log."),
        ({"duration": ""}, "grant-until", "Give an expiry or a duration (one of them)."),
        ({"expires_at": soon}, "grant-until", "Give an expiry or a duration (not both)."),
        ({"duration": "1 month"}, "grant-duration", "Duration must be an ISO 8601 duration"),
        ({"duration": "P20Y"}, "grant-duration", "Duration must end within 3660 days."),
        ({"duration": "", "expires_at": past}, "grant-expires", "The expiry must be in the future."),
        ({"duration": "", "expires_at": "soon"}, "grant-expires", "Expires at must be an ISO 8601 timestamp"),
    ):
        r = browser.post(f"/dashboard/customers/user-7/grant?app_id={workspace['app_id']}",
                         data=grant_form(token, **fields))  # fmt: skip
        assert r.status_code == 400 and r.mimetype == "text/html", fields
        page = r.get_data(as_text=True)
        found = re.search(rf'<small id="{field_id}-error" class="field-error">([^<]*)</small>', page)
        assert found and html.unescape(found.group(1)).startswith(words), (fields, found and found.group(1))
        assert 'id="form-grant"' in page and '<dialog id="dialog-grant"' not in page  # the form open on the page
        assert 'value="ticket 42"' in page or ">ticket 42</textarea>" in page or fields.get("reason")  # kept as typed
    assert grants_count(db) == 1  # only the store's purchase


def test_unknown_customers_grants_and_apps(browser: FlaskClient, db: Database, workspace: dict) -> None:
    missing = browser.get("/dashboard/customers/nobody")
    assert missing.status_code == 404 and missing.mimetype == "text/html"
    assert "FloKit has never heard of this user" in text(missing.get_data(as_text=True))
    statement(db, workspace, fact("1000001", user_hint="user-7"))
    page = browser.get("/dashboard/customers/user-7")
    assert page.status_code == 200  # one app: app_id may be left out
    token = csrf_of(page.get_data(as_text=True))
    unknown = browser.post("/dashboard/customers/user-7/entitlements/grt_nope/end", data={"csrf_token": token})
    assert unknown.status_code == 404 and unknown.mimetype == "text/html"
    assert browser.get("/dashboard/customers/user-7?timeline_before=yesterday").status_code == 400
    with db.write() as conn:
        create_app(conn, workspace_id=workspace["workspace_id"], name="Second")
    several = browser.get("/dashboard/customers/user-7")
    assert several.status_code == 400 and "app_id is required" in text(several.get_data(as_text=True))
    assert browser.get(customer_url(workspace, "user-7")).status_code == 200
    assert browser.get("/dashboard/customers/user-7?app_id=app_elsewhere").status_code == 404


def test_the_timeline_pages_back_with_older(browser: FlaskClient, db: Database, workspace: dict) -> None:
    # 26 grants: 26 statements and 26 audit entries, 52 timeline entries, more than a page of 50.
    with db.write() as conn:
        for i in range(26):
            repo.grant_promotional(
                conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id="user-7",
                product_id=f"p{i}", ends_at=utcnow() + timedelta(days=3), reason="r", actor="test",
            )  # fmt: skip
    page = browser.get(customer_url(workspace, "user-7")).get_data(as_text=True)
    first = re.findall(r'<tr class="kind-', page)
    assert len(first) == 50
    older = re.search(r'<a href="([^"]+)" rel="next">Older</a>', page)
    assert older, "no Older link"
    rest = browser.get(html.unescape(older.group(1)))
    assert rest.status_code == 200
    body = rest.get_data(as_text=True)
    assert 0 < len(re.findall(r'<tr class="kind-', body)) <= 2
    assert ">Newest</a>" in body and 'rel="next">Older' not in body


def test_an_end_refusal_stays_beside_the_end_form_and_the_grant_keeps_running(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    with db.write() as conn:
        promo = repo.grant_promotional(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id="user-7",
            product_id="pro", ends_at=utcnow() + timedelta(days=3), reason="vip", actor="test",
        )  # fmt: skip
    token = csrf_of(browser.get(customer_url(workspace, "user-7")).get_data(as_text=True))
    # A refused grant form does not mark the End dialogs' fields.
    refused = browser.post(f"/dashboard/customers/user-7/grant?app_id={workspace['app_id']}",
                           data=grant_form(token, reason=""))  # fmt: skip
    assert refused.status_code == 400
    page = refused.get_data(as_text=True)
    assert 'id="grant-reason-error"' in page and f'id="end-reason-{promo.id}-error"' not in page

    too_long = browser.post(f"/dashboard/customers/user-7/entitlements/{promo.id}/end",
                            data={"csrf_token": token, "reason": "x" * 2001})  # fmt: skip
    assert too_long.status_code == 400 and too_long.mimetype == "text/html"
    page = too_long.get_data(as_text=True)
    found = re.search(rf'<small id="end-reason-{promo.id}-error" class="field-error">([^<]*)</small>', page)
    assert found and found.group(1) == "A reason has at most 2000 characters."
    assert 'id="grant-reason-error"' not in page
    assert entitlement(browser, workspace, "user-7")["active"] is True

    with db.write() as conn:
        create_app(conn, workspace_id=workspace["workspace_id"], name="Second")
    unnamed = browser.post("/dashboard/customers/user-7/grant", data=grant_form(token))
    assert unnamed.status_code == 400 and "app_id is required" in text(unnamed.get_data(as_text=True))
    assert grants_count(db) == 1
