"""`flokit admin integrations ...`: connect, list, show and disconnect integrations; open syncs.

The config file holds the provider's credentials and options (fields per type: README,
"Integrations"); it is validated against the type's declaration, an error names the field.
Secrets are sealed with the instance key before they reach the database and are never printed
again (at most their last four characters). `--check` makes one cheap authenticated call
before saving anything, and saves nothing when the provider refuses.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cli.connecting import read_config, save
from cli.context import App, json_option, pass_app
from transforms.client_errors import ClientError
from transforms.integrations.kinds import INTEGRATION_TYPES, ValidConfig, kind_of, validate_config
from transforms.timefmt import iso_z
from warehouse.db import utcnow
from warehouse.errors import Conflict, NotFound, TransitionRefused
from warehouse.integrations import repository as repo
from warehouse.integrations.stats import sync_stats

ACTOR = "cli"


def _integration(i: repo.Integration) -> dict[str, Any]:
    return {
        "integration_id": i.id,
        "workspace_id": i.workspace_id,
        "type": i.type,
        "status": i.status,
        "last_synced_at": iso_z(i.last_synced_at),
        "error_message": i.error_message,
        "options": i.options,
        "credentials": i.credential_hints,
        "cadence_hours": i.cadence_hours,
        "created_at": iso_z(i.created_at),
    }


def _sync(s: repo.Sync) -> dict[str, Any]:
    return {
        "sync_id": s.id,
        "trigger": s.trigger,
        "status": s.status,
        "queued_at": iso_z(s.queued_at),
        "started_at": iso_z(s.started_at),
        "finished_at": iso_z(s.finished_at),
        "records_written": s.records_written,
        "error_code": s.error_code,
        "error_message": s.error_message,
        "run_id": s.run_id,
    }


def check_config(integration_type: str, config: ValidConfig) -> str:
    """One cheap authenticated call through the type's connector; its one-line summary."""
    from orchestration.syncs.connectors import connector_for  # deferred: loads Dagster

    connector = connector_for(integration_type)
    return connector.check(connector.client(config))


@click.group()
def integrations() -> None:
    """Integrations: connect a provider, list, show with the sync history, disconnect."""


@integrations.command("connect")
@click.option("--workspace", "workspace_id", required=True)
@click.option("--type", "integration_type", required=True, type=click.Choice(INTEGRATION_TYPES))
@click.option("--config", "config_file", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Make one cheap authenticated call first; save nothing if it fails.")
@json_option
@pass_app
def connect(app: App, workspace_id: str, integration_type: str, config_file: Path, check: bool) -> None:
    """Connect an integration from a JSON config file; prints integration_id, type and status."""
    fields = kind_of(integration_type).all_fields()
    config = read_config(app, config_file, lambda raw: validate_config(integration_type, raw), fields)
    key = app.instance_key()
    answer = None
    if check:
        try:
            answer = check_config(integration_type, config)
        except ClientError as failure:
            app.fail(f"check failed ({failure.code}): {failure.message}; nothing was saved")
    integration = save(
        app,
        lambda conn: repo.connect(
            conn,
            workspace_id=workspace_id,
            integration_type=integration_type,
            config=config,
            instance_key=key,
            actor=ACTOR,
        ),
        (NotFound, Conflict),
    )
    result = {**_integration(integration), "check": answer}
    human = f"{integration.id}  {integration.type}  {integration.status}"
    app.emit(result, human + (f"\ncheck: {answer}" if answer else ""))


@integrations.command("list")
@click.option("--workspace", "workspace_id", required=True)
@json_option
@pass_app
def list_(app: App, workspace_id: str) -> None:
    """Every integration of a workspace with its status and last successful sync."""
    with app.database.read() as conn:
        found = [_integration(i) for i in repo.list_integrations(conn, workspace_id=workspace_id)]
    human = "\n".join(
        f"{i['integration_id']}  {i['type']:24} {i['status']:12} last synced {i['last_synced_at'] or 'never'}"
        + (f"  ({i['error_message']})" if i["status"] == "error" else "")
        for i in found
    )
    app.emit({"workspace_id": workspace_id, "integrations": found}, human or "no integrations")


@integrations.command("show")
@click.option("--integration", "integration_id", required=True)
@json_option
@pass_app
def show(app: App, integration_id: str) -> None:
    """One integration, its sync_stats and its sync history (newest first)."""
    try:
        with app.database.read() as conn:
            integration = repo.get_integration_for_operator(conn, integration_id=integration_id)
            history = repo.sync_history(conn, integration_id=integration_id)
            stats = sync_stats(conn, app.settings.paths.lake(), integration, utcnow())
    except NotFound as exc:
        app.fail(str(exc))
    result = {
        **_integration(integration),
        "sync_stats": {
            "events_last_24h": stats.events_last_24h,
            "events_total": stats.events_total,
            "earliest_event_at": iso_z(stats.earliest_event_at),
        },
        "syncs": [_sync(s) for s in history],
    }
    lines = [
        f"{integration.id}  {integration.type}  {integration.status}",
        f"  last synced {iso_z(integration.last_synced_at) or 'never'}; credentials {integration.credential_hints}",
        f"  events total {stats.events_total}, last 24 h {stats.events_last_24h}, "
        f"earliest {iso_z(stats.earliest_event_at) or '-'}",
    ]
    if integration.error_message:
        lines.append(f"  error: {integration.error_message}")
    for s in history:
        tail = f"  {s.error_code}: {s.error_message}" if s.status == "failed" else ""
        lines.append(f"  {s.id}  {s.trigger:9} {s.status:9} {iso_z(s.queued_at)}  {s.records_written} rows{tail}")
    app.emit(result, "\n".join(lines))


@integrations.command("disconnect")
@click.option("--integration", "integration_id", required=True)
@json_option
@pass_app
def disconnect(app: App, integration_id: str) -> None:
    """Disconnect: status `disconnected`, the credentials erased, a queued sync cancelled."""
    try:
        with app.database.write() as conn:
            integration = repo.disconnect(conn, integration_id=integration_id, actor=ACTOR)
    except NotFound as exc:
        app.fail(str(exc))
    app.emit(_integration(integration), f"{integration.id}  {integration.type}  {integration.status}")


# The sync's error message when an operator ends it (`syncs --fail`), with the reason given.
OPERATOR_FAILED = "failed by an operator (flokit admin integrations syncs --fail): {reason}"


@integrations.command("syncs")
@click.option(
    "--fail",
    "fail_id",
    metavar="SYNC_ID",
    help="End this queued or running sync as failed (its integration can sync again at once).",
)
@click.option("--reason", default="no reason given", show_default=True, help="Kept in the sync's error message.")
@json_option
@pass_app
def syncs(app: App, fail_id: str | None, reason: str) -> None:
    """The open (queued or running) syncs of every workspace; --fail SYNC_ID ends one.

    A sync whose run failed or vanished is failed by the daemon and by `flokit refresh` on their
    own (docs/reliability.md); --fail is for what no rule can decide, such as a run that hangs.
    Were its run still alive, that run fails when it ends: what it landed stays (landing is
    idempotent) and the next sync pulls from the same high-water mark.
    """
    if fail_id is None:
        with app.database.read() as conn:
            found = [_sync(s) | {"integration_id": s.integration_id} for s, _ in repo.queued_syncs(conn)]
            found += [_sync(s) | {"integration_id": s.integration_id} for s in repo.running_syncs(conn)]
        human = "\n".join(
            f"{s['sync_id']}  {s['integration_id']}  {s['status']:8} queued {s['queued_at']}"
            + (f"  started {s['started_at']} (run {s['run_id']})" if s["started_at"] else "")
            for s in found
        )
        app.emit({"syncs": found}, human or "no open sync")
        return
    try:
        with app.database.write() as conn:
            ended = repo.finish_failure(
                conn, sync_id=fail_id, code=None, message=OPERATOR_FAILED.format(reason=reason), refused=False
            )
    except NotFound as exc:
        app.fail(str(exc))
    except TransitionRefused as exc:
        app.fail(f"{exc} ({exc.status}): only a queued or running sync can be failed")
    app.emit(
        _sync(ended) | {"integration_id": ended.integration_id},
        f"{ended.id}  {ended.status}: {ended.error_message}",
    )
