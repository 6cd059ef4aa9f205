"""`flokit admin login-link` and the link `flokit up` prints: minted by the CLI, honoured by the API."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner
from flask.testing import FlaskClient

from api.app import create_app
from cli.context import App
from cli.main import main
from cli.up import dashboard_link
from tests.support.dashboard import OPERATOR, confirm
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.settings import Settings


def flokit(settings: Settings, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=settings.child_env(), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def path_of(url: str) -> str:
    parts = urlsplit(url)
    assert (parts.scheme, parts.hostname) == ("http", "127.0.0.1")
    return f"{parts.path}?{parts.query}"


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_the_printed_link_signs_in_once(settings: Settings, client: FlaskClient, workspace: dict) -> None:
    code, out, _ = flokit(settings, "admin", "login-link", "--as", OPERATOR)
    assert code == 0
    url = out.strip()
    assert url.startswith(f"http://127.0.0.1:{settings.api_port}/dashboard/login?token=")
    assert confirm(client, path_of(url)).status_code == 303
    page = client.get("/dashboard/actions").get_data(as_text=True)
    assert OPERATOR in page and workspace["workspace_id"] in page
    assert client.application.test_client().get(path_of(url)).status_code == 410


def test_json_ttl_and_the_named_workspace(settings: Settings, db: Database, workspace: dict) -> None:
    with db.write() as conn:
        second = bootstrap(conn, name="Second Co")
    code, _, err = flokit(settings, "admin", "login-link", "--as", OPERATOR, "--json")
    assert code == 1 and json.loads(err) == {"error": "there are several workspaces: name one with --workspace"}
    code, out, _ = flokit(
        settings,
        "admin",
        "login-link",
        "--as",
        OPERATOR,
        "--workspace",
        second["workspace_id"],
        "--ttl",
        "2h",
        "--json",
    )
    assert code == 0 and list(json.loads(out)) == ["url"]
    client = create_app(settings).test_client()
    assert confirm(client, path_of(json.loads(out)["url"])).status_code == 303
    assert "Second Co" in client.get("/dashboard/actions").get_data(as_text=True)


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_refusals_name_what_is_wrong(settings: Settings, workspace: dict) -> None:
    code, _, err = flokit(settings, "admin", "login-link", "--as", "maya")
    assert code == 1 and "must be an email address" in err
    code, _, err = flokit(settings, "admin", "login-link", "--as", OPERATOR, "--workspace", "ws_missing")
    assert code == 1 and "no workspace ws_missing" in err
    for ttl in ("forever", "0m", "2d", "15"):
        code, _, err = flokit(settings, "admin", "login-link", "--as", OPERATOR, "--ttl", ttl, "--json")
        assert code == 1 and "TTL must be" in json.loads(err)["error"], ttl


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_no_workspace_yet_is_a_clear_error(settings: Settings, db: Database) -> None:
    code, _, err = flokit(settings, "admin", "login-link", "--as", OPERATOR)
    assert code == 1 and "no workspace exists yet" in err


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: dashboard/sessions.py")
def test_flokit_up_prints_a_link_for_the_workspace_it_bootstrapped(settings: Settings, db: Database) -> None:
    with db.write() as conn:
        demo = bootstrap(conn, name="Demo workspace", actor="flokit up")
        bootstrap(conn, name="Later Co")
    link = dashboard_link(App(_settings=settings), settings)
    assert link is not None and (settings.data_dir / "instance.key").is_file() is (settings.instance_key is None)
    client = create_app(settings).test_client()
    assert confirm(client, path_of(link)).status_code == 303
    page = client.get("/dashboard/actions").get_data(as_text=True)
    assert demo["workspace_id"] in page and "@localhost" in page
