"""Fixtures for the dashboard's Flask-client tests: an instance key, a signed-in browser."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from tests.support.dashboard import csrf_of, sign_in
from warehouse.db import Database
from warehouse.settings import Settings


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """The dashboard signs its cookie with a key derived from the instance key: tests have one."""
    return Settings(data_dir=tmp_path / "data", database_url=database_url, instance_key=secrets.token_urlsafe(32))


@pytest.fixture
def browser(client: FlaskClient, db: Database, workspace: dict) -> FlaskClient:
    """A test client signed in as OPERATOR in the workspace."""
    return sign_in(client, db, workspace["workspace_id"])


@pytest.fixture
def token(browser: FlaskClient) -> str:
    return csrf_of(browser.get("/dashboard/actions").get_data(as_text=True))
