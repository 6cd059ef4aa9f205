"""Where integrations and ad accounts may send requests (clients/egress.py), as an operator and
an attacker would see it: connecting to the instance's own network is refused unless the host is
named in FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS, a sync checks again when it runs, follows no
redirect to another host, and keeps only a status and a short message of what a target answered.

The targets are real HTTP servers on 127.0.0.1 (pytest-httpserver); the test suite allows
127.0.0.1 and localhost (tests/conftest.py), so the tests of the policy itself remove or narrow it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient
from pytest_httpserver import HTTPServer

from cli.main import main
from clients.egress import Egress
from clients.http import ProviderHttp, RetryRules, guarded_session
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from orchestration.syncs.connectors.attribution_provider_a import CONNECTOR, client_for
from orchestration.syncs.jobs import SYNC_TAG, integration_sync_job, sync_run_config
from tests.providers.apple_search_ads_fake import new_private_key
from tests.support import bearer
from transforms.client_errors import ClientError
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.integrations.target import SyncTarget
from warehouse.lake import LocalLake
from warehouse.settings import INTEGRATIONS_PRIVATE_HOSTS_ENV, Settings

KEY = "k" * 43
TOKEN = "adjust-token-0123456789abcdef"
# What an internal service might answer: a page with something that must never leave the instance.
SECRET = "AKIA" + "SECRETSECRET" * 40
ANY_PATH = re.compile(".*")


@pytest.fixture
def target() -> Iterator[HTTPServer]:
    with HTTPServer(host="127.0.0.1", port=0) as running:
        yield running


@pytest.fixture
def elsewhere() -> Iterator[HTTPServer]:
    """Another host: reached as `localhost`, a name that is not the target's `127.0.0.1`."""
    with HTTPServer(host="127.0.0.1", port=0) as running:
        yield running


def cli(settings: Settings, *args: str, private_hosts: str) -> Any:
    env = {**settings.child_env(), "FLOKIT_SECRET_KEY": KEY, INTEGRATIONS_PRIVATE_HOSTS_ENV: private_hosts}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def connect_with(settings: Settings, workspace_id: str, tmp_path: Path, config: dict[str, Any], **kw: str) -> Any:
    path = tmp_path / "adjust.json"
    path.write_text(json.dumps(config))
    return cli(
        settings, "admin", "integrations", "connect", "--workspace", workspace_id,
        "--type", "attribution_provider_a", "--config", str(path), "--json", **kw,
    )  # fmt: skip


@pytest.mark.parametrize("base_url", ["http://169.254.169.254/", "http://127.0.0.1:{port}", "https://127.0.0.1:{port}"])
def test_connecting_to_the_instances_own_network_is_refused(
    settings: Settings, db: Database, workspace: dict[str, Any], tmp_path: Path, target: HTTPServer, base_url: str
) -> None:
    config = {"api_token": TOKEN, "base_url": base_url.format(port=target.port)}
    done = connect_with(settings, workspace["workspace_id"], tmp_path, config, private_hosts="")
    assert done.exit_code == 1
    assert "invalid config: base_url:" in done.output and "FLOKIT_INTEGRATIONS_ALLOW_PRIVATE_HOSTS" in done.output
    with db.read() as conn:
        assert repo.list_integrations(conn, workspace_id=workspace["workspace_id"]) == []
    assert target.log == []  # nothing was called


def test_a_host_the_operator_names_may_be_private(
    settings: Settings, workspace: dict[str, Any], tmp_path: Path, target: HTTPServer
) -> None:
    config = {"api_token": TOKEN, "base_url": f"http://127.0.0.1:{target.port}"}
    other = connect_with(settings, workspace["workspace_id"], tmp_path, config, private_hosts="proxy.internal")
    assert other.exit_code == 1 and "non-public address 127.0.0.1" in other.output
    named = connect_with(
        settings, workspace["workspace_id"], tmp_path, config, private_hosts="proxy.internal,127.0.0.1"
    )
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout)["options"]["base_url"] == f"http://127.0.0.1:{target.port}"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: settings.py, and the egress rules")
def test_an_ad_accounts_token_url_on_the_metadata_address_is_refused(
    settings: Settings, db: Database, workspace: dict[str, Any], tmp_path: Path
) -> None:
    config = {
        "client_id": "SEARCHADS.x", "team_id": "SEARCHADS.x", "key_id": "k1", "org_id": "42",
        "private_key": new_private_key()[1], "token_url": "http://169.254.169.254/latest/meta-data/",
        "base_url": "https://api.searchads.apple.com",
    }  # fmt: skip
    path = tmp_path / "asa.json"
    path.write_text(json.dumps(config))
    done = cli(
        settings, "admin", "ad-accounts", "connect", "--workspace", workspace["workspace_id"],
        "--platform", "apple_search_ads", "--config", str(path), private_hosts="",
    )  # fmt: skip
    assert done.exit_code == 1 and "invalid config: token_url:" in done.output


def connect(db: Database, workspace_id: str, base_url: str) -> str:
    config = validate_config("attribution_provider_a", {"api_token": TOKEN, "base_url": base_url, "lookback_days": 1})
    with db.write() as conn:
        return repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type="attribution_provider_a",
            config=config,
            instance_key=KEY,
            actor="ops@example.com",
        ).id


def run_sync(db: Database, settings: Settings, integration_id: str) -> repo.Sync:
    """One sync through the real job, as the daemon runs it."""
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=integration_id)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    (settings.data_dir / "instance.key").write_text(KEY + "\n")
    with dg.DagsterInstance.ephemeral() as instance:
        result = integration_sync_job.execute_in_process(
            instance=instance,
            run_config=sync_run_config(sync.id),
            tags={SYNC_TAG: sync.id},
            resources={
                "database": DatabaseResource(url=settings.database_url),
                "data_dir": DataDirResource(root=str(settings.data_dir)),
                "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
            },
        )
    assert result.success
    with db.read() as conn:
        return repo.get_sync(conn, sync_id=sync.id)


def test_a_sync_checks_the_address_again_when_it_runs(
    settings: Settings, db: Database, workspace: dict[str, Any], target: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connected while 127.0.0.1 was allowed (or while the name resolved to a public address):
    the sync refuses to call it now, and calls nothing."""
    integration_id = connect(db, workspace["workspace_id"], target.url_for("/").rstrip("/"))
    monkeypatch.setenv(INTEGRATIONS_PRIVATE_HOSTS_ENV, "")
    sync = run_sync(db, settings, integration_id)
    assert (sync.status, sync.error_code) == ("failed", "config")
    assert "non-public address 127.0.0.1" in (sync.error_message or "")
    assert target.log == []


def test_a_redirect_to_another_host_is_not_followed(
    settings: Settings, db: Database, workspace: dict[str, Any], target: HTTPServer, elsewhere: HTTPServer
) -> None:
    elsewhere.expect_request(ANY_PATH).respond_with_data(SECRET)
    target.expect_request(ANY_PATH).respond_with_data(
        "", status=302, headers={"Location": f"http://localhost:{elsewhere.port}/latest/meta-data/"}
    )
    integration_id = connect(db, workspace["workspace_id"], target.url_for("/").rstrip("/"))
    sync = run_sync(db, settings, integration_id)
    assert elsewhere.log == []  # never asked
    assert len(target.log) == 1
    assert sync.status == "failed" and "HTTP 302" in (sync.error_message or "")
    assert SECRET[:20] not in (sync.error_message or "")


@pytest.mark.parametrize("content_type", ["text/html", "application/json"])
def test_a_refusal_shows_the_status_and_a_short_text_never_the_targets_body(
    settings: Settings,
    db: Database,
    workspace: dict[str, Any],
    target: HTTPServer,
    client: FlaskClient,
    content_type: str,
) -> None:
    """A 404 is a refusal: the integration goes to `error` and read-only v1 keys read its message."""
    body = json.dumps({"message": SECRET}) if content_type == "application/json" else f"<html>{SECRET}</html>"
    target.expect_request(ANY_PATH).respond_with_data(body, status=404, content_type=content_type)
    integration_id = connect(db, workspace["workspace_id"], target.url_for("/").rstrip("/"))
    sync = run_sync(db, settings, integration_id)
    assert (sync.status, sync.error_code) == ("failed", "config")
    shown = client.get(f"/v1/integrations/{integration_id}", headers=bearer(workspace["api_key_read_only"]))
    message = shown.json["integration"]["error_message"]
    assert "HTTP 404" in message and len(message) <= 300
    assert SECRET not in message and SECRET[:300] not in message
    if content_type == "text/html":
        assert "SECRETSECRET" not in message  # a body that is not a provider's error is never repeated


def test_a_500_with_a_long_body_keeps_only_the_status_and_a_short_text(
    db: Database, workspace: dict[str, Any], target: HTTPServer, tmp_path: Path
) -> None:
    target.expect_request(ANY_PATH).respond_with_data(SECRET, status=500, content_type="text/plain")
    config = validate_config("attribution_provider_a", {"api_token": TOKEN, "base_url": target.url_for("/")})
    sync_target = SyncTarget(
        db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], "int_t", "attribution_provider_a"
    )
    with pytest.raises(ClientError) as failure:
        CONNECTOR.sync(client_for(config, backoff_s=0.01), sync_target, config, lambda _line: None)
    message = failure.value.message  # what the sync history stores as error_message
    assert failure.value.code == "provider_error" and "HTTP 500" in message
    assert "SECRET" not in message and len(message) < 200


def test_every_connection_checks_the_address_it_connects_to(target: HTTPServer) -> None:
    """A name that resolved to a public address when checked and answers 127.0.0.1 now (DNS
    rebinding) is refused by the connection itself, before anything is sent."""
    target.expect_request(ANY_PATH).respond_with_data(SECRET)
    rebinding = Egress(resolver=lambda _host, _port: ["127.0.0.1"])
    http = ProviderHttp("fake", guarded_session(rebinding), RetryRules(backoff_s=0.01), timeout=(2, 2))
    with pytest.raises(ClientError) as failure:
        http.request("GET", f"http://provider.example:{target.port}/report", what="report")
    assert failure.value.code == "config" and "non-public address 127.0.0.1" in failure.value.message
    assert target.log == []
    allowed = Egress(private_hosts=frozenset({"provider.example"}), resolver=lambda _host, _port: ["127.0.0.1"])
    answer = ProviderHttp("fake", guarded_session(allowed), RetryRules(), timeout=(2, 2)).request(
        "GET", f"http://provider.example:{target.port}/report", what="report"
    )
    assert answer.status_code == 200 and len(target.log) == 1
