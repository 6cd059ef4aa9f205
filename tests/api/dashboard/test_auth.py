"""Dashboard sign-in over HTTP: the one-time link, the session cookie, CSRF, sign-out, headers.
(The link's confirmation page and its login CSRF: test_login_confirm.py.)"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import bearer
from tests.support.dashboard import OPERATOR, confirm, csrf_of, login_link, sign_in
from warehouse.audit import entries
from warehouse.dashboard import sessions
from warehouse.db import Database, utcnow
from warehouse.settings import Settings

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
# Every dashboard route a signed-out browser may try, with its method.
PROTECTED = [
    ("GET", "/dashboard/"),
    ("GET", "/dashboard/actions"),
    ("GET", "/dashboard/actions/act_x"),
    ("GET", "/dashboard/actions/act_x/approve"),
    ("POST", "/dashboard/actions/act_x/approve"),
    ("POST", "/dashboard/actions/act_x/reject"),
    ("POST", "/dashboard/actions/act_x/rollback"),
    ("POST", "/dashboard/logout"),
    ("POST", "/dashboard/logout-everywhere"),
]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
def test_every_page_without_a_session_is_a_401_page_saying_how_to_get_a_link(
    client: FlaskClient, method: str, path: str
) -> None:
    r = client.open(path, method=method)
    assert r.status_code == 401 and r.mimetype == "text/html"
    page = r.get_data(as_text=True)
    assert "<title>Sign-in needed · FloKit</title>" in page
    assert "flokit admin login-link --as" in page
    assert r.headers["Content-Security-Policy"] == CSP and r.headers["Cache-Control"] == "no-store"


def test_a_link_signs_in_once_with_a_flagged_cookie_and_a_second_use_is_refused(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    link = login_link(db, workspace["workspace_id"])
    r = confirm(client, link)
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/"
    assert r.headers["Referrer-Policy"] == "no-referrer"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("flokit_dashboard=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie and "Path=/" in cookie
    page = client.get("/dashboard/actions")
    assert page.status_code == 200 and OPERATOR in page.get_data(as_text=True)
    assert "Acme Fitness" in page.get_data(as_text=True)

    other = create_app_client(client.application)
    again = other.get(link)
    assert again.status_code == 410 and "already used" in again.get_data(as_text=True)
    assert "flokit admin login-link --as" in again.get_data(as_text=True)
    assert again.headers["Referrer-Policy"] == "no-referrer"
    assert other.get("/dashboard/actions").status_code == 401
    with db.read() as conn:
        done = [e["action"] for e in entries(conn, workspace_id=workspace["workspace_id"])]
    assert "dashboard.login_link_created" in done and done.count("dashboard.signed_in") == 1


def create_app_client(app: Flask) -> FlaskClient:
    """A second browser: same server, its own cookie jar."""
    return app.test_client()


def test_an_expired_or_unknown_link_is_refused(client: FlaskClient, db: Database, workspace: dict) -> None:
    with db.write() as conn:
        old = sessions.create_login_token(
            conn, operator=OPERATOR, workspace_id=workspace["workspace_id"], now=utcnow() - timedelta(minutes=16)
        )
    r = client.get(f"/dashboard/login?token={old}")
    assert r.status_code == 410 and "has expired" in r.get_data(as_text=True)
    r = client.get("/dashboard/login?token=not-a-token")
    assert r.status_code == 400 and "not valid" in r.get_data(as_text=True)
    assert client.get("/dashboard/login").status_code == 400
    # The same refusals when the form is posted (a page left open until the link expired).
    form = {"csrf_token": csrf_of(client.get(login_link(db, workspace["workspace_id"])).get_data(as_text=True))}
    r = client.post("/dashboard/login", data={**form, "token": old})
    assert r.status_code == 410 and "has expired" in r.get_data(as_text=True)
    r = client.post("/dashboard/login", data={**form, "token": "not-a-token"})
    assert r.status_code == 400 and "not valid" in r.get_data(as_text=True)
    assert client.post("/dashboard/login", data=form).status_code == 400
    assert client.get("/dashboard/actions").status_code == 401


def test_over_https_behind_a_trusted_proxy_the_cookie_is_secure_and_host_bound(
    settings: Settings, db: Database, workspace: dict
) -> None:
    app = create_app(dataclasses.replace(settings, trusted_proxies=1))
    client = app.test_client()
    proto = {"X-Forwarded-Proto": "https"}
    r = confirm(client, login_link(db, workspace["workspace_id"]), headers=proto)
    assert r.status_code == 303
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("__Host-flokit_dashboard=") and "Secure" in cookie and "Domain" not in cookie
    assert client.get("/dashboard/actions", headers=proto).status_code == 200
    # Without a trusted proxy, a caller's own X-Forwarded-Proto is not believed.
    plain = create_app(settings).test_client()
    r = confirm(plain, login_link(db, workspace["workspace_id"]), headers=proto)
    assert r.headers["Set-Cookie"].startswith("flokit_dashboard=") and "Secure" not in r.headers["Set-Cookie"]


def test_the_cookie_is_signed_with_the_instance_key_so_every_worker_agrees(
    app: Flask, settings: Settings, db: Database, workspace: dict
) -> None:
    first = app.test_client()
    sign_in(first, db, workspace["workspace_id"])
    cookie = first.get_cookie("flokit_dashboard")
    assert cookie is not None
    # Another worker (another create_app) with the same instance key reads the same cookie.
    second = create_app(settings).test_client()
    second.set_cookie("flokit_dashboard", cookie.value)
    assert second.get("/dashboard/actions").status_code == 200
    # An instance with another key does not.
    stranger = create_app(dataclasses.replace(settings, instance_key="k" * 43)).test_client()
    stranger.set_cookie("flokit_dashboard", cookie.value)
    assert stranger.get("/dashboard/actions").status_code == 401


def test_without_an_instance_key_the_dashboard_says_how_to_make_one(settings: Settings) -> None:
    client = create_app(dataclasses.replace(settings, instance_key=None)).test_client()
    r = client.get("/dashboard/actions")
    assert r.status_code == 503 and "flokit db upgrade" in r.get_data(as_text=True)


def test_a_session_idle_for_12_hours_or_older_than_7_days_ends(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    from warehouse.dashboard.tables import dashboard_sessions

    assert browser.get("/dashboard/actions").status_code == 200
    with db.write() as conn:
        conn.execute(dashboard_sessions.update().values(last_seen_at=utcnow() - timedelta(hours=12, minutes=1)))
    r = browser.get("/dashboard/actions")
    assert r.status_code == 401 and "Your session has ended" in r.get_data(as_text=True)
    sign_in(browser, db, workspace["workspace_id"])
    with db.write() as conn:
        conn.execute(dashboard_sessions.update().values(expires_at=utcnow() - timedelta(seconds=1)))
    assert browser.get("/dashboard/actions").status_code == 401


def test_a_post_without_the_csrf_token_is_a_400_page_and_with_it_works(browser: FlaskClient, token: str) -> None:
    r = browser.post("/dashboard/logout")
    assert r.status_code == 400 and r.mimetype == "text/html"
    assert "CSRF token is missing" in r.get_data(as_text=True)
    assert browser.post("/dashboard/logout", data={"csrf_token": "forged"}).status_code == 400
    assert browser.get("/dashboard/actions").status_code == 200  # still signed in
    r = browser.post("/dashboard/logout", headers={"X-CSRFToken": token})
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/signed-out"


def test_v1_and_gateway_posts_need_no_csrf_token(client: FlaskClient, workspace: dict) -> None:
    r = client.post(
        "/v1/actions",
        json={"workspace_id": workspace["workspace_id"], "type": "pause_creative"},
        headers=bearer(workspace["api_key_read_write"]),
    )
    assert r.status_code == 201
    event = {
        "event_type": "impression",
        "app_id": workspace["app_id"],
        "properties": {"paywall_id": "onboarding", "variant_id": "b", "product_id": "pro_weekly"},
        "occurred_at": "2026-11-20T10:00:00Z",
    }
    r = client.post(
        "/api/paywall/events", json={"events": [event]}, headers={"x-app-key": workspace["app_key"], "x-user-id": "u1"}
    )
    assert r.status_code in (200, 202), r.get_data(as_text=True)
    assert "Set-Cookie" not in r.headers


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_sign_out_ends_this_session_and_sign_out_everywhere_ends_the_others(
    app: Flask, db: Database, workspace: dict
) -> None:
    ws = workspace["workspace_id"]
    laptop, phone, tablet = (sign_in(app.test_client(), db, ws) for _ in range(3))
    other_operator = sign_in(app.test_client(), db, ws, "lee@example.com")
    token = csrf_of(laptop.get("/dashboard/actions").get_data(as_text=True))
    r = laptop.post("/dashboard/logout", data={"csrf_token": token})
    assert r.status_code == 303
    assert laptop.get("/dashboard/actions").status_code == 401
    assert phone.get("/dashboard/actions").status_code == 200

    token = csrf_of(phone.get("/dashboard/actions").get_data(as_text=True))
    r = phone.post("/dashboard/logout-everywhere", data={"csrf_token": token}, follow_redirects=True)
    assert r.status_code == 200 and "(2 in all)" in r.get_data(as_text=True)
    assert phone.get("/dashboard/actions").status_code == 401
    assert tablet.get("/dashboard/actions").status_code == 401
    assert other_operator.get("/dashboard/actions").status_code == 200


def test_headers_404_pages_favicon_and_vendor_caching(browser: FlaskClient) -> None:
    r = browser.get("/dashboard/actions")
    assert r.headers["Content-Security-Policy"] == CSP
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Cache-Control"] == "no-store"
    for path in ("/dashboard/nope", "/dashboard/actions/act_unknown", "/dashboard/static/nope.js"):
        r = browser.get(path)
        assert r.status_code == 404 and r.mimetype == "text/html", path
        assert "<title>Not found · FloKit</title>" in r.get_data(as_text=True)
        assert r.headers["Content-Security-Policy"] == CSP
    assert browser.put("/dashboard/actions").status_code == 405
    # (Static files are streamed: each response is closed, or the file stays open.)
    with browser.get("/dashboard/static/favicon.svg") as icon:
        assert icon.status_code == 200 and icon.mimetype == "image/svg+xml"
    with browser.get("/dashboard/static/vendor/htmx-2.0.11.min.js") as vendor:
        assert vendor.status_code == 200 and vendor.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    with browser.get("/dashboard/static/app.js") as own:
        assert own.headers["Cache-Control"] == "no-cache" and own.headers["Content-Security-Policy"] == CSP
    # The other surfaces keep their JSON errors.
    assert browser.get("/v1/nope").json["error"] == "not_found"


def test_pages_are_not_in_the_openapi_document(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").json["paths"]
    assert not [p for p in paths if p.startswith("/dashboard")]


def test_the_layout_has_landmarks_one_h1_and_the_csrf_header_for_htmx(browser: FlaskClient, token: str) -> None:
    page = browser.get("/dashboard/actions").get_data(as_text=True)
    assert '<html lang="en">' in page and "<title>Actions · FloKit</title>" in page
    assert page.count("<h1") == 1 and "<header" in page and "<nav" in page and '<main id="main"' in page
    assert 'href="#main"' in page and 'aria-current="page"' in page
    assert f'hx-headers=\'{{"X-CSRFToken": "{token}"}}\'' in page
    assert 'role="status" aria-live="polite"' in page and 'role="alert"' in page
    assert "style=" not in page and "<script>" not in page and "http://" not in page
    assert page.index("htmx-2.0.11.min.js") < page.index("app.js")
