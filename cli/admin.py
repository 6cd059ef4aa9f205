"""`flokit admin ...`: workspaces and API keys (the spec's "dashboard", as commands for now)."""

from __future__ import annotations

import click

from cli.context import App, json_option, pass_app
from warehouse import workspaces
from warehouse.bootstrap import bootstrap as bootstrap_workspace
from warehouse.errors import NotFound


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
