"""`flokit admin ...`: workspaces and API keys (the spec's "dashboard", as commands for now)."""

from __future__ import annotations

import click

from cli.context import App, json_option, pass_app
from transforms import dashboard_auth
from warehouse import workspaces
from warehouse.bootstrap import bootstrap as bootstrap_workspace
from warehouse.dashboard import sessions
from warehouse.errors import NotFound
from warehouse.settings import Settings


@click.group()
def admin() -> None:
    """Workspaces, keys and apps."""


@admin.command()
@click.option("--name", required=True, help="Workspace name.")
@json_option
@pass_app
def bootstrap(app: App, name: str) -> None:
    """Create a workspace with a read-write key, a read-only key and an app. Keys are shown once."""
    with app.database.write() as conn:
        result = bootstrap_workspace(conn, name=name)
    app.emit(result)


@admin.group()
def keys() -> None:
    """v1 API keys: create, rotate, revoke."""


@keys.command("create")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--scope", type=click.Choice(list(workspaces.SCOPES)), required=True)
@json_option
@pass_app
def create_key(app: App, workspace_id: str, scope: workspaces.Scope) -> None:
    """Issue a new key. It is printed once; only its SHA-256 hash is stored."""
    try:
        with app.database.write() as conn:
            issued = workspaces.create_key(conn, workspace_id=workspace_id, scope=scope)
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    app.emit({"key_id": issued.key_id, "api_key": issued.api_key})


@keys.command("rotate")
@click.option("--key-id", required=True)
@json_option
@pass_app
def rotate_key(app: App, key_id: str) -> None:
    """Replace a key's secret; the previous secret is rejected immediately."""
    try:
        with app.database.write() as conn:
            issued = workspaces.rotate_key(conn, key_id=key_id)
    except NotFound:
        app.fail(f"no active key {key_id}")
    app.emit({"key_id": issued.key_id, "api_key": issued.api_key})


@keys.command("revoke")
@click.option("--key-id", required=True)
@json_option
@pass_app
def revoke_key(app: App, key_id: str) -> None:
    """Revoke a key for good."""
    try:
        with app.database.write() as conn:
            workspaces.revoke_key(conn, key_id=key_id)
    except NotFound:
        app.fail(f"no active key {key_id}")
    app.emit({"key_id": key_id, "revoked": True}, f"key {key_id} revoked")


def login_url(settings: Settings, token: str) -> str:
    """Where a login link's token is opened: this instance's API port on the loopback address, as
    `flokit up` serves it (behind a proxy, replace the origin with the public one)."""
    return f"http://127.0.0.1:{settings.api_port}/dashboard/login?token={token}"


@admin.command("login-link")
@click.option("--as", "operator", required=True, help="The operator's email: the actor of what they do.")
@click.option("--workspace", "workspace_id", help="The workspace to sign in to (optional when there is one).")
@click.option("--ttl", default="15m", show_default=True, help="How long the link works: 90s, 15m, 2h, at most 24h.")
@json_option
@pass_app
def login_link(app: App, operator: str, workspace_id: str | None, ttl: str) -> None:
    """A one-time link to sign OPERATOR in to the dashboard.

    Opening it shows the workspace, the operator and a Sign in button; pressing the button uses the
    link, so a link preview that only fetches it leaves it working. It works once; only its hash is
    stored."""
    try:
        email = dashboard_auth.operator_email(operator)
        lifetime = dashboard_auth.parse_ttl(ttl)
    except dashboard_auth.InvalidValue as exc:
        app.fail(str(exc))
    try:
        with app.database.write() as conn:
            chosen = sessions.the_workspace(conn, workspace_id)
            token = sessions.create_login_token(conn, operator=email, workspace_id=chosen, ttl=lifetime)
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    except sessions.WorkspaceAmbiguous as exc:
        app.fail(str(exc))
    url = login_url(app.settings, token)
    app.emit({"url": url}, url)
