"""`flokit admin integrations ...` as an operator runs it: connect from a config file, list,
show, disconnect; secrets never printed again, config errors name the field."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import Ran, flokit_in_process

pytestmark = pytest.mark.e2e
TOKEN = "adjust-secret-token-0123456789abcdef"


def flokit(env: dict[str, str], *args: str) -> Ran:
    return flokit_in_process(env, *args)


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "FLOKIT_DATA_DIR": str(tmp_path / "data"), "FLOKIT_DATABASE_URL": database_url}
    env.pop("FLOKIT_SECRET_KEY", None)
    assert flokit(env, "db", "upgrade").returncode == 0  # creates the instance key
    return env


@pytest.fixture
def workspace_id(env: dict[str, str]) -> str:
    done = flokit(env, "admin", "bootstrap", "--name", "Acme", "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["workspace_id"])


def write(tmp_path: Path, config: object) -> str:
    path = tmp_path / "adjust.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_connect_list_show_disconnect(env: dict[str, str], workspace_id: str, tmp_path: Path) -> None:
    config = write(tmp_path, {"api_token": TOKEN, "base_url": "http://127.0.0.1:9"})
    done = flokit(
        env, "admin", "integrations", "connect", "--workspace", workspace_id, "--type", "attribution_provider_a",
        "--config", config, "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    connected = json.loads(done.stdout)
    assert connected["integration_id"].startswith("int_")
    assert (connected["type"], connected["status"]) == ("attribution_provider_a", "connected")
    assert connected["credentials"] == {"api_token": "…cdef"}
    integration_id = connected["integration_id"]

    listed = flokit(env, "admin", "integrations", "list", "--workspace", workspace_id)
    assert listed.returncode == 0 and integration_id in listed.stdout and "never" in listed.stdout
    shown = json.loads(flokit(env, "admin", "integrations", "show", "--integration", integration_id, "--json").stdout)
    assert shown["syncs"] == [] and shown["sync_stats"]["events_total"] == 0
    assert shown["options"]["base_url"] == "http://127.0.0.1:9"
    for out in (done.stdout, listed.stdout, json.dumps(shown)):
        assert TOKEN not in out

    again = flokit(
        env, "admin", "integrations", "connect", "--workspace", workspace_id, "--type", "attribution_provider_a",
        "--config", config,
    )  # fmt: skip
    assert again.returncode == 1 and "disconnect it first" in again.stderr

    gone = flokit(env, "admin", "integrations", "disconnect", "--integration", integration_id, "--json")
    assert gone.returncode == 0 and json.loads(gone.stdout)["status"] == "disconnected"
    assert json.loads(gone.stdout)["credentials"] == {}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, "invalid config: api_token: is required"),
        ({"api_token": TOKEN, "lookback": 3}, "invalid config: lookback: unknown field"),
        ([1, 2], "invalid config: the config must be a JSON object"),
    ],
)
def test_an_invalid_config_is_refused_naming_the_field(
    env: dict[str, str], workspace_id: str, tmp_path: Path, config: object, expected: str
) -> None:
    done = flokit(
        env, "admin", "integrations", "connect", "--workspace", workspace_id, "--type", "attribution_provider_a",
        "--config", write(tmp_path, config),
    )  # fmt: skip
    assert done.returncode == 1 and expected in done.stderr
    assert "no integrations" in flokit(env, "admin", "integrations", "list", "--workspace", workspace_id).stdout
