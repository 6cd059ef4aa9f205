"""The API as it runs in production: gunicorn, a real process, real HTTP on 127.0.0.1."""

import os
from pathlib import Path

import pytest
import requests

from tests.support import gunicorn_server
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


def test_gunicorn_serves_healthz_and_workspace(settings: Settings, workspace: dict, tmp_path: Path) -> None:
    env = {**os.environ, **settings.child_env()}
    with gunicorn_server(env, workers=2, log_dir=tmp_path) as server:
        base = server.base
        r = requests.get(f"{base}/healthz", timeout=5)
        assert r.json() == {"status": "ok"} and r.headers["X-Request-Id"]
        r = requests.get(
            f"{base}/v1/workspace", headers={"Authorization": f"Bearer {workspace['api_key_read_only']}"}, timeout=5
        )
        assert r.status_code == 200 and r.json()["id"] == workspace["workspace_id"]
        r = requests.get(f"{base}/v1/workspace", timeout=5)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    assert server.process.returncode == 0, server.stderr.read_text()[-2000:]
