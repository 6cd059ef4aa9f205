"""The sign-in link's confirmation page: opening the link uses nothing, the Sign in button does,
and only from that page (login CSRF). Both databases."""

from __future__ import annotations

import html as htmllib
from datetime import timedelta

from flask import Flask
from flask.testing import FlaskClient

from tests.support.dashboard import OPERATOR, confirm, csrf_of, login_link, token_of
from warehouse.audit import entries
from warehouse.dashboard import sessions
from warehouse.db import Database, utcnow


def signed_in_actions(client: FlaskClient) -> int:
    return client.get("/dashboard/actions").status_code


def test_opening_the_link_twice_uses_nothing_and_the_button_then_signs_in(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    link = login_link(db, workspace["workspace_id"])
    # A link preview fetches the address first, then the operator opens it.
    preview = client.application.test_client().get(link)
    assert preview.status_code == 200
    shown = client.get(link)
    assert shown.status_code == 200 and signed_in_actions(client) == 401
    with db.read() as conn:
        done = [e["action"] for e in entries(conn, workspace_id=workspace["workspace_id"])]
    assert "dashboard.signed_in" not in done

    html = shown.get_data(as_text=True)
    r = client.post("/dashboard/login", data={"csrf_token": csrf_of(html), "token": token_of(html)})
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/"
    assert signed_in_actions(client) == 200


def test_the_page_names_the_workspace_the_operator_and_the_expiry_and_keeps_the_token_private(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    now = utcnow()
    with db.write() as conn:
        token = sessions.create_login_token(
            conn, operator=OPERATOR, workspace_id=workspace["workspace_id"], ttl=timedelta(hours=2), now=now
        )
    r = client.get(f"/dashboard/login?token={token}")
    page = htmllib.unescape(r.get_data(as_text=True))
    assert "<title>Sign in · FloKit</title>" in page
    assert f'<h1 class="login-confirm-title">Sign in to Acme Fitness as {OPERATOR}</h1>' in page
    assert workspace["workspace_id"] in page
    assert f'until <time datetime="{(now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")}">' in page
    assert f"{(now + timedelta(hours=2)):%Y-%m-%d %H:%M} UTC</time>" in page
    assert '<form method="post" action="/dashboard/login"' in page and ">Sign in</button>" in page
    assert r.headers["Referrer-Policy"] == "no-referrer"
    assert r.headers["Cache-Control"] == "no-store" and "form-action 'self'" in r.headers["Content-Security-Policy"]
    # The pre-session CSRF secret rides in the signed cookie the page sets.
    assert r.headers["Set-Cookie"].startswith("flokit_dashboard=") and "HttpOnly" in r.headers["Set-Cookie"]


def test_the_button_works_once(app: Flask, client: FlaskClient, db: Database, workspace: dict) -> None:
    link = login_link(db, workspace["workspace_id"])
    # Two tabs (or two browsers) open the link; the first to press Sign in gets the session.
    other = app.test_client()
    forms = [client.get(link).get_data(as_text=True), other.get(link).get_data(as_text=True)]
    first, second = ({"csrf_token": csrf_of(html), "token": token_of(html)} for html in forms)
    assert client.post("/dashboard/login", data=first).status_code == 303
    again = other.post("/dashboard/login", data=second)
    assert again.status_code == 410 and "This sign-in link was already used" in again.get_data(as_text=True)
    assert "flokit admin login-link --as" in again.get_data(as_text=True)
    assert signed_in_actions(other) == 401 and signed_in_actions(client) == 200
    # Opening the used link answers 410 too, with the same page.
    opened = app.test_client().get(link)
    assert opened.status_code == 410 and "already used" in opened.get_data(as_text=True)
    with db.read() as conn:
        done = [e["action"] for e in entries(conn, workspace_id=workspace["workspace_id"])]
    assert done.count("dashboard.signed_in") == 1


def test_a_post_without_the_pages_csrf_proof_is_refused_and_leaves_the_link_working(
    app: Flask, db: Database, workspace: dict
) -> None:
    link = login_link(db, workspace["workspace_id"])
    token = link.split("token=")[1]
    # The attacker's page posts a link it holds from a browser that never opened it.
    victim = app.test_client()
    r = victim.post("/dashboard/login", data={"token": token})
    assert r.status_code == 400 and r.mimetype == "text/html"
    assert "CSRF token is missing" in r.get_data(as_text=True) and "Open the sign-in link again" in r.get_data(
        as_text=True
    )
    # With a CSRF token the attacker got from its own visit: the victim's cookie has no matching secret.
    attacker = app.test_client()
    stolen = csrf_of(attacker.get(link).get_data(as_text=True))
    r = victim.post("/dashboard/login", data={"token": token, "csrf_token": stolen})
    assert r.status_code == 400 and "CSRF session token is missing" in r.get_data(as_text=True)
    victim.get(login_link(db, workspace["workspace_id"]))  # the victim has a secret of its own now
    r = victim.post("/dashboard/login", data={"token": token, "csrf_token": stolen})
    assert r.status_code == 400 and "CSRF tokens do not match" in r.get_data(as_text=True)
    # A browser saying the POST came from another site is refused even with a matching pair.
    html = victim.get(link).get_data(as_text=True)
    form = {"csrf_token": csrf_of(html), "token": token}
    r = victim.post("/dashboard/login", data=form, headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 400 and "not from another site" in r.get_data(as_text=True)
    assert signed_in_actions(victim) == 401
    # None of that used the link: its own page still signs in.
    assert victim.post("/dashboard/login", data=form, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 303
    assert signed_in_actions(victim) == 200


def test_an_expired_link_is_410_and_an_unknown_one_400_whether_opened_or_posted(
    client: FlaskClient, db: Database, workspace: dict
) -> None:
    link = login_link(db, workspace["workspace_id"])
    html = client.get(link).get_data(as_text=True)
    form = {"csrf_token": csrf_of(html), "token": token_of(html)}
    with db.write() as conn:  # the page was left open past the link's end
        from warehouse.dashboard.tables import dashboard_login_tokens

        conn.execute(dashboard_login_tokens.update().values(expires_at=utcnow() - timedelta(seconds=1)))
    r = client.post("/dashboard/login", data=form)
    assert r.status_code == 410 and "<h1>Link no longer valid</h1>" in r.get_data(as_text=True)
    assert "This sign-in link has expired" in r.get_data(as_text=True)
    r = client.get(link)
    assert r.status_code == 410 and "This sign-in link has expired" in r.get_data(as_text=True)
    assert r.headers["Referrer-Policy"] == "no-referrer"
    r = client.post("/dashboard/login", data={**form, "token": "guessed"})
    assert r.status_code == 400 and "<h1>Link not valid</h1>" in r.get_data(as_text=True)
    assert client.get("/dashboard/login?token=guessed").status_code == 400
    assert signed_in_actions(client) == 401


def test_a_signed_in_browser_is_told_the_link_replaces_its_session(
    browser: FlaskClient, db: Database, workspace: dict
) -> None:
    link = login_link(db, workspace["workspace_id"], "lee@example.com")
    page = browser.get(link).get_data(as_text=True)
    assert f"This browser is signed in as <strong>{OPERATOR}</strong>" in page
    assert "signing in with this link ends that session" in page
    assert confirm(browser, link).status_code == 303
    assert "lee@example.com" in browser.get("/dashboard/actions").get_data(as_text=True)
