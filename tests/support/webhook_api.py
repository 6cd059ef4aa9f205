"""Fixtures of the v1 webhook tests (endpoints, recovery): an API whose instance may send to the
local receiver (127.0.0.1), that receiver, and the two keys' headers. Import the fixtures by name
into a test module (and list them in its `__all__`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import WEBHOOK_KEY, bearer
from tests.support.webhook_receiver import receiver
from warehouse.settings import Settings

BASE = "/v1/webhooks/endpoints"
__all__ = ["BASE", "api", "local_app", "receiver", "ro", "rw"]


@pytest.fixture
def local_app(settings: Settings) -> Flask:
    """The API of an instance that allows private addresses (the receiver is on 127.0.0.1)."""
    return create_app(dataclasses.replace(settings, webhooks_allow_private=True, instance_key=WEBHOOK_KEY))


@pytest.fixture
def api(local_app: Flask) -> FlaskClient:
    return local_app.test_client()


def rw(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_write"])


def ro(workspace: dict[str, Any]) -> dict[str, str]:
    return bearer(workspace["api_key_read_only"])
