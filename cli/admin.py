"""`flokit admin ...`: workspaces and API keys (the spec's "dashboard", as commands for now)."""

from __future__ import annotations

import click

from cli.context import load_settings, open_database
from cli.output import emit, fail
from warehouse import workspaces
from warehouse.bootstrap import bootstrap as bootstrap_workspace

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@click.group()
def admin() -> None:
    """Workspaces, keys and apps."""


@admin.command()
@click.option("--name", required=True, help="Workspace name.")
@JSON_OPTION
def bootstrap(name: str, as_json: bool) -> None:
    """Create a workspace with a read-write key, a read-only key and an app. Keys are shown once."""
    database = open_database(load_settings())
    with database.write() as conn:
        result = bootstrap_workspace(conn, name=name)
    emit(result, as_json)


@admin.group()
def keys() -> None:
    """v1 API keys: create, rotate, revoke."""


@keys.command("create")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--scope", type=click.Choice(list(workspaces.SCOPES)), required=True)
@JSON_OPTION
def create_key(workspace_id: str, scope: workspaces.Scope, as_json: bool) -> None:
    """Issue a new key. It is printed once; only its SHA-256 hash is stored."""
    database = open_database(load_settings())
    try:
        with database.write() as conn:
            issued = workspaces.create_key(conn, workspace_id=workspace_id, scope=scope)
    except workspaces.NotFound:
        fail(f"no workspace {workspace_id}", as_json)
    emit({"key_id": issued.key_id, "api_key": issued.api_key}, as_json)


@keys.command("rotate")
@click.option("--key-id", required=True)
@JSON_OPTION
def rotate_key(key_id: str, as_json: bool) -> None:
    """Replace a key's secret; the previous secret is rejected immediately."""
    database = open_database(load_settings())
    try:
        with database.write() as conn:
            issued = workspaces.rotate_key(conn, key_id=key_id)
    except workspaces.NotFound:
        fail(f"no active key {key_id}", as_json)
    emit({"key_id": issued.key_id, "api_key": issued.api_key}, as_json)


@keys.command("revoke")
@click.option("--key-id", required=True)
@JSON_OPTION
def revoke_key(key_id: str, as_json: bool) -> None:
    """Revoke a key for good."""
    database = open_database(load_settings())
    try:
        with database.write() as conn:
            workspaces.revoke_key(conn, key_id=key_id)
    except workspaces.NotFound:
        fail(f"no active key {key_id}", as_json)
    emit({"key_id": key_id, "revoked": True}, as_json, f"key {key_id} revoked")
