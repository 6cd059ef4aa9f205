"""The API as it runs in production: gunicorn, a real process, real HTTP on 127.0.0.1."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support import ROOT, free_port, http_ok, wait_for
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


def test_gunicorn_serves_healthz_and_workspace(settings: Settings, workspace: dict, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, **settings.child_env(), "FLOKIT_API_PORT": str(port)}
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    proc = subprocess.Popen(
        [gunicorn, "--bind", f"127.0.0.1:{port}", "--workers", "2", "api.app:create_app()"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(http_ok(f"{base}/healthz"), 30, "gunicorn /healthz", proc)
        r = requests.get(f"{base}/healthz", timeout=5)
        assert r.json() == {"status": "ok"} and r.headers["X-Request-Id"]
        r = requests.get(
            f"{base}/v1/workspace", headers={"Authorization": f"Bearer {workspace['api_key_read_only']}"}, timeout=5
        )
        assert r.status_code == 200 and r.json()["id"] == workspace["workspace_id"]
        r = requests.get(f"{base}/v1/workspace", timeout=5)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()[-2000:]
