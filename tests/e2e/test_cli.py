"""The `flokit` command as an operator runs it: JSON out, real database. The commands run in-process
(`tests.support.cli`); the last test runs the installed `flokit` itself, for its exit status."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.app import create_app
from tests.support import bearer
from tests.support.cli import run, run_json
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e
FLOKIT = str(Path(sys.executable).parent / "flokit")


def test_admin_commands_end_to_end(settings: Settings) -> None:
    upgraded = run_json(settings, "db", "upgrade")
    assert upgraded["to"] and upgraded["to"] == upgraded["from"]  # the fixture migrated already
    # The suite's throwaway PostgreSQL skips fsync: named, as it would be in production.
    named = [w.split(" = ")[0] for w in upgraded["durability_warnings"]]
    assert named == ([] if settings.is_sqlite else ["PostgreSQL fsync", "PostgreSQL full_page_writes"])

    boot = run_json(settings, "admin", "bootstrap", "--name", "Cli Co")
    assert set(boot) >= {"workspace_id", "api_key_read_write", "api_key_read_only", "app_id", "app_key"}
    client = create_app(settings).test_client()
    assert client.get("/v1/workspace", headers=bearer(boot["api_key_read_write"])).json["name"] == "Cli Co"

    created = run_json(settings, "admin", "keys", "create", "--workspace", boot["workspace_id"], "--scope", "read_only")
    assert created["key_id"].startswith("key_") and created["api_key"].startswith("flk_")
    assert client.get("/v1/workspace", headers=bearer(created["api_key"])).status_code == 200

    rotated = run_json(settings, "admin", "keys", "rotate", "--key-id", created["key_id"])
    assert rotated["key_id"] == created["key_id"] and rotated["api_key"] != created["api_key"]
    assert client.get("/v1/workspace", headers=bearer(created["api_key"])).status_code == 401
    assert client.get("/v1/workspace", headers=bearer(rotated["api_key"])).status_code == 200

    run(settings, "admin", "keys", "revoke", "--key-id", created["key_id"])
    assert client.get("/v1/workspace", headers=bearer(rotated["api_key"])).status_code == 401


def test_cli_errors_are_clear(settings: Settings) -> None:
    r = run(
        settings, "admin", "keys", "create", "--workspace", "ws_missing", "--scope", "read_only", "--json", ok=False
    )
    assert r.returncode == 1 and json.loads(r.stderr) == {"error": "no workspace ws_missing"}
    r = run(settings, "admin", "keys", "rotate", "--key-id", "key_missing", ok=False)
    assert r.returncode == 1 and "no active key key_missing" in r.stderr
    bad = {**os.environ, **settings.child_env(), "FLOKIT_API_PORT": "nope"}
    r = subprocess.run([FLOKIT, "db", "upgrade"], env=bad, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode != 0 and "FLOKIT_API_PORT must be a TCP port" in r.stderr
