"""Fixtures for the dashboard's Flask-client tests: an instance key, a signed-in browser."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from warehouse.dashboard import sessions
from warehouse.db import Database
from warehouse.settings import Settings

OPERATOR = "maya@example.com"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """The dashboard signs its cookie with a key derived from the instance key: tests have one."""
    return Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=secrets.token_urlsafe(32))


def login_link(db: Database, workspace_id: str, operator: str = OPERATOR) -> str:
    with db.write() as conn:
        token = sessions.create_login_token(conn, operator=operator, workspace_id=workspace_id)
    return f"/dashboard/login?token={token}"


def sign_in(client: FlaskClient, db: Database, workspace_id: str, operator: str = OPERATOR) -> FlaskClient:
    r = client.get(login_link(db, workspace_id, operator))
    assert r.status_code == 302 and r.headers["Location"] == "/dashboard/", r.get_data(as_text=True)
    return client


def csrf_of(html: str) -> str:
    """The CSRF token a page carries in its forms."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, "no CSRF field on the page"
    return found.group(1)


@pytest.fixture
def browser(client: FlaskClient, db: Database, workspace: dict) -> FlaskClient:
    """A test client signed in as OPERATOR in the workspace."""
    return sign_in(client, db, workspace["workspace_id"])


@pytest.fixture
def token(browser: FlaskClient) -> str:
    return csrf_of(browser.get("/dashboard/actions").get_data(as_text=True))
