"""Signing in to the dashboard as a browser does: a login link, its confirmation page, the CSRF token."""

from __future__ import annotations

import re
from typing import Any

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from warehouse.dashboard import sessions
from warehouse.db import Database

OPERATOR = "maya@example.com"


def login_link(db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=operator, workspace_id=workspace_id)
    return f"/dashboard/login?token={token}"


def confirm(client: FlaskClient, link: str, **kwargs: Any) -> TestResponse:
    """Open the link's page and press its Sign in button: the answer to that POST."""
    shown = client.get(link, **kwargs)
    assert shown.status_code == 200, shown.get_data(as_text=True)
    html = shown.get_data(as_text=True)
    return client.post("/dashboard/login", data={"csrf_token": csrf_of(html), "token": token_of(html)}, **kwargs)


def sign_in(client: FlaskClient, db: Database, workspace_id: str, operator: str = OPERATOR) -> FlaskClient:
    r = confirm(client, login_link(db, workspace_id, operator))
    assert r.status_code == 303 and r.headers["Location"] == "/dashboard/", r.get_data(as_text=True)
    return client


def token_of(html: str) -> str:
    """The sign-in link's token, as the confirmation page carries it in its form."""
    found = re.search(r'name="token" value="([^"]+)"', html)
    assert found, "no token field on the page"
    return found.group(1)


def csrf_of(html: str) -> str:
    """The CSRF token a page carries in its forms."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)
