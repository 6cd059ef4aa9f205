"""`flokit admin ad-accounts ...`: connect, list, remove and sync the ad accounts actions run on.

The config file holds the platform's credentials and options (fields per platform: README, "Ad
accounts"); it is validated against the platform's declaration, an error names the field.
Secrets are sealed with the instance key before they reach the database and are never printed
again (at most their last four characters), as for the integrations. `sync` runs the registry
sync now, in this process, and prints what it found. The `sandbox` platform changes only FloKit's
own records; every output names it as such.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.connecting import read_config, save
from cli.context import App, json_option, pass_app
from transforms.adaccounts.kinds import PLATFORMS, kind_of, validate_config
from transforms.timefmt import iso_z
from warehouse.adaccounts import repository as repo
from warehouse.errors import AlreadyExists, NotFound, TransitionRefused

ACTOR = "cli"
SANDBOX_NOTE = "sandbox: changes apply only to FloKit's own records, no ad platform is called"


def _account(a: repo.AdAccount, entity_count: int | None = None) -> dict[str, Any]:
    options = dict(a.options)
    if "campaigns" in options:
        options["campaigns"] = [c["name"] for c in options["campaigns"]]
    return {
        "ad_account_id": a.id,
        "workspace_id": a.workspace_id,
        "platform": a.platform,
        "sandbox": a.platform == "sandbox",
        "name": a.name,
        "status": a.status,
        "external_account_id": a.external_account_id,
        "currency": a.currency,
        "last_synced_at": iso_z(a.last_synced_at),
        "last_error": a.last_error,
        "options": options,
        "credentials": a.credential_hints,
        "entities": entity_count,
        "created_at": iso_z(a.created_at),
    }


def _entity(e: repo.Entity) -> dict[str, Any]:
    return {
        "entity_type": e.entity_type,
        "external_id": e.external_id,
        "parent_external_id": e.parent_external_id,
        "name": e.name,
        "status": e.status,
        "daily_budget": e.daily_budget,
        "currency": e.currency,
        "report_campaign": e.report_campaign,
        "report_creative": e.report_creative,
        "edited_at": iso_z(e.edited_at),
        "synced_at": iso_z(e.synced_at),
    }


def _human(a: dict[str, Any]) -> str:
    line = f"{a['ad_account_id']}  {a['platform']:17} {a['status']:12} {a['name']}"
    line += f"  last synced {a['last_synced_at'] or 'never'}"
    if a["entities"] is not None:
        line += f", {a['entities']} object(s)"
    if a["status"] == "error":
        line += f"  ({a['last_error']})"
    if a["sandbox"]:
        line += f"  [{SANDBOX_NOTE}]"
    return line


@click.group("ad-accounts")
def ad_accounts() -> None:
    """Ad accounts: connect Meta, Apple Search Ads or the sandbox; list, remove, sync the registry."""


@ad_accounts.command("connect")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--platform", required=True, type=click.Choice(PLATFORMS))
@click.option("--config", "config_file", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="A name for the account in listings (default: the platform's id).")
@json_option
@pass_app
def connect(app: App, workspace_id: str, platform: str, config_file: Path, name: str | None) -> None:
    """Connect an ad account from a JSON config file; prints ad_account_id, platform and status."""
    fields = kind_of(platform).all_fields() if platform != "sandbox" else None  # the sandbox calls nothing
    config = read_config(app, config_file, lambda raw: validate_config(platform, raw), fields)
    key = app.instance_key()
    account = save(
        app,
        lambda conn: repo.connect(
            conn, workspace_id=workspace_id, platform=platform, config=config, instance_key=key, actor=ACTOR, name=name
        ),
        (NotFound, AlreadyExists),
    )
    result = _account(account)
    human = f"{account.id}  {account.platform}  {account.status}" + (f"\n{SANDBOX_NOTE}" if result["sandbox"] else "")
    app.emit(result, human + "\nrun `flokit admin ad-accounts sync` (or `flokit refresh`) to read its objects")


@ad_accounts.command("list")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--entities", "with_entities", is_flag=True, help="Also list each account's objects (the registry).")
@json_option
@pass_app
def list_(app: App, workspace_id: str, with_entities: bool) -> None:
    """Every ad account of a workspace with its status, last sync and number of objects."""
    found = []
    lines = []
    with app.database.read() as conn:
        for account in repo.list_accounts(conn, workspace_id=workspace_id):
            objects = repo.entities(conn, ad_account_id=account.id)
            item = _account(account, len(objects))
            lines.append(_human(item))
            if with_entities:
                item["registry"] = [_entity(e) for e in objects]
                for e in objects:
                    budget = f"{e.daily_budget} {e.currency} (minor units)/day" if e.daily_budget is not None else "-"
                    label = f"{e.report_campaign or '-'} / {e.report_creative or '-'}"
                    lines.append(
                        f"    {e.entity_type:9} {e.external_id:24} {e.status:8} {budget:32} {e.name}  -> {label}"
                    )
            found.append(item)
    app.emit({"workspace_id": workspace_id, "ad_accounts": found}, "\n".join(lines) or "no ad accounts")


@ad_accounts.command("remove")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--id", "ad_account_id", required=True)
@json_option
@pass_app
def remove(app: App, workspace_id: str, ad_account_id: str) -> None:
    """Remove: status `disconnected`, the credentials erased, its objects kept but marked removed."""
    try:
        with app.database.write() as conn:
            account = repo.remove(conn, ad_account_id=ad_account_id, workspace_id=workspace_id, actor=ACTOR)
    except NotFound as exc:
        app.fail(str(exc))
    app.emit(_account(account), f"{account.id}  {account.platform}  {account.status}")


@ad_accounts.command("sync")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--id", "ad_account_id", default=None, help="Sync this account only (default: every live account).")
@json_option
@pass_app
def sync(app: App, workspace_id: str, ad_account_id: str | None) -> None:
    """Run the registry sync now, in this process; prints per account what it found. Exit 1 when
    an account's sync failed."""
    from orchestration.adaccounts.sync import sync_accounts  # deferred: the clients load the SDKs

    key = app.instance_key()
    try:
        results = sync_accounts(
            app.database, app.settings.paths.lake(), key, workspace_id=workspace_id, ad_account_id=ad_account_id
        )
    except (NotFound, TransitionRefused) as exc:
        app.fail(str(exc))
    out = [
        {
            "ad_account_id": r.ad_account_id,
            "platform": r.platform,
            "status": r.status,
            "listed": r.counts.listed if r.counts else None,
            "created": r.counts.created if r.counts else None,
            "updated": r.counts.updated if r.counts else None,
            "unchanged": r.counts.unchanged if r.counts else None,
            "removed": r.counts.removed if r.counts else None,
            "mapped_campaigns": r.mapped_campaigns,
            "mapped_creatives": r.mapped_creatives,
            "error_code": r.error_code,
            "message": r.message,
        }
        for r in results
    ]
    human = "\n".join(r.summary() + ("  [sandbox]" if r.platform == "sandbox" else "") for r in results)
    app.emit({"workspace_id": workspace_id, "syncs": out}, human or "no live ad accounts")
    if any(r.status == "failed" for r in results):
        raise SystemExit(1)
