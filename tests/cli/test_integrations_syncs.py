"""`flokit admin integrations syncs [--fail SYNC_ID]`: an operator lists the open syncs and ends
one that no rule can (a run that hangs), with a clear refusal for an unknown or ended sync."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import main
from tests.support.databases import fresh_database_url
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.settings import Settings

KEY = "k" * 43


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One backend for a CLI's behaviour; the repository's transitions are tested on both."""
    yield from fresh_database_url(request, "sqlite", tmp_path)


def flokit(settings: Settings, *args: str) -> Result:
    return CliRunner().invoke(main, ["admin", "integrations", *args], env=settings.child_env())


def running_sync(db: Database, workspace_id: str) -> repo.Sync:
    with db.write() as conn:
        integration = repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type="attribution_provider_a",
            config=validate_config("attribution_provider_a", {"api_token": "adjust-token-0123456789abcdef"}),
            instance_key=KEY,
            actor="ops@example.com",
        )
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration.id)
        assert repo.start_sync(conn, sync_id=sync.id, run_id="a-run-that-hangs", instance_key=KEY)
        return repo.get_sync(conn, sync_id=sync.id)


def test_an_operator_ends_a_running_sync_and_the_integration_can_sync_again(
    settings: Settings, db: Database, workspace: dict
) -> None:
    sync = running_sync(db, workspace["workspace_id"])
    listed = flokit(settings, "syncs", "--json")
    assert listed.exit_code == 0, listed.output
    assert [(s["sync_id"], s["status"], s["run_id"]) for s in json.loads(listed.stdout)["syncs"]] == [
        (sync.id, "running", "a-run-that-hangs")
    ]

    done = flokit(settings, "syncs", "--fail", sync.id, "--reason", "its run hangs on the provider", "--json")
    assert done.exit_code == 0, done.output
    ended = json.loads(done.stdout)
    assert (ended["sync_id"], ended["status"], ended["error_code"]) == (sync.id, "failed", None)
    assert ended["error_message"] == (
        "failed by an operator (flokit admin integrations syncs --fail): its run hangs on the provider"
    )
    with db.write() as conn:
        integration = repo.get_integration_for_operator(conn, integration_id=sync.integration_id)
        again, created = repo.request_sync_for_operator(conn, integration_id=sync.integration_id)
    assert integration.status == "connected"  # no longer `syncing`
    assert created and again.id != sync.id
    assert flokit(settings, "syncs").stdout.startswith(f"{again.id}  {sync.integration_id}  queued")


def test_an_unknown_or_ended_sync_is_refused_with_the_reason(settings: Settings, db: Database, workspace: dict) -> None:
    sync = running_sync(db, workspace["workspace_id"])
    unknown = flokit(settings, "syncs", "--fail", "sync_nosuchsync", "--json")
    assert unknown.exit_code == 1 and json.loads(unknown.stderr) == {"error": "Sync sync_nosuchsync not found"}
    assert flokit(settings, "syncs", "--fail", sync.id).exit_code == 0
    twice = flokit(settings, "syncs", "--fail", sync.id)
    assert twice.exit_code == 1
    assert twice.stderr == (
        f"error: Sync {sync.id} has already ended (failed): only a queued or running sync can be failed\n"
    )
    assert flokit(settings, "syncs").stdout == "no open sync\n"
