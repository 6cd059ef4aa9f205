"""`flokit admin ingest ...`: vendor credentials, event mappings, IP allowlists and dropped callbacks."""

from __future__ import annotations

from datetime import timedelta

import click

from cli.context import App, json_option, pass_app
from transforms.event_types import CANONICAL_EVENT_TYPES
from warehouse.db import utcnow
from warehouse.errors import AlreadyExists, InvalidIngestConfig, NotFound
from warehouse.ingest import repository

VENDOR_OPTION = click.option("--vendor", required=True, help="Vendor name, e.g. attribution_provider_a.")


@click.group()
def ingest() -> None:
    """Measurement ingest: vendor credentials, event mappings, allowlists, dropped callbacks."""


@ingest.command("map")
@click.option("--workspace", "workspace_id", required=True)
@VENDOR_OPTION
@click.option("--token", required=True, help="Vendor event token, or activity_kind:<kind> for callbacks without one.")
@click.option("--event-type", type=click.Choice(sorted(CANONICAL_EVENT_TYPES)), required=True)
@json_option
@pass_app
def map_token(app: App, workspace_id: str, vendor: str, token: str, event_type: str) -> None:
    """Map a vendor event token to a canonical event type (replaces an existing mapping)."""
    try:
        with app.database.write() as conn:
            repository.set_mapping(conn, workspace_id=workspace_id, vendor=vendor, token=token, event_type=event_type)
            current = repository.mappings(conn, workspace_id=workspace_id, vendor=vendor)
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    except InvalidIngestConfig as exc:
        app.fail(str(exc))
    app.emit(
        {"workspace_id": workspace_id, "vendor": vendor, "mappings": current},
        f"{vendor} token {token!r} -> {event_type} in {workspace_id}",
    )


@ingest.command("allowlist")
@VENDOR_OPTION
@click.option("--add", "add", multiple=True, metavar="CIDR", help="Allow a network (repeatable).")
@click.option("--remove", "remove", multiple=True, metavar="CIDR", help="Remove a network (repeatable).")
@json_option
@pass_app
def allowlist(app: App, vendor: str, add: tuple[str, ...], remove: tuple[str, ...]) -> None:
    """Show, extend or shrink a vendor's IP allowlist. An empty list accepts callbacks from anywhere."""
    try:
        with app.database.write() as conn:
            for cidr in add:
                repository.allow(conn, vendor=vendor, cidr=cidr)
            for cidr in remove:
                repository.disallow(conn, vendor=vendor, cidr=cidr)
            networks = repository.allowlist(conn, vendor=vendor)
    except InvalidIngestConfig as exc:
        app.fail(str(exc))
    app.emit(
        {"vendor": vendor, "allowlist": networks},
        f"{vendor} allowlist: {', '.join(networks) if networks else '(empty: any address)'}",
    )


@ingest.command("credentials")
@click.option("--workspace", "workspace_id", help="Register a new app token for this workspace.")
@VENDOR_OPTION
@click.option("--app-token", help="The vendor's app token (generated when omitted for a new registration).")
@click.option(
    "--rotate", is_flag=True, help="Issue a new secret for an existing --app-token; the old one stops working."
)
@json_option
@pass_app
def credentials(app: App, workspace_id: str | None, vendor: str, app_token: str | None, rotate: bool) -> None:
    """Register a vendor app token with a new secret, or rotate its secret. The secret is shown once."""
    if rotate == bool(workspace_id) or (rotate and not app_token):
        app.fail("pass either --workspace (register) or --rotate --app-token (rotate)", code=2)
    try:
        with app.database.write() as conn:
            if rotate:
                issued = repository.rotate_secret(conn, vendor=vendor, app_token=app_token or "")
            else:
                issued = repository.create_credential(
                    conn, workspace_id=workspace_id or "", vendor=vendor, app_token=app_token
                )
    except NotFound as exc:
        app.fail(f"not found: {exc}")
    except AlreadyExists:
        app.fail(f"app token {app_token} is already registered for {vendor}; use --rotate for a new secret")
    except InvalidIngestConfig as exc:
        app.fail(str(exc))
    app.emit(
        {
            "workspace_id": issued.workspace_id,
            "ingest_vendor": issued.vendor,
            "ingest_app_token": issued.app_token,
            "ingest_secret": issued.secret,
        },
    )


@ingest.command("drops")
@click.option("--workspace", "workspace_id", help="Only this workspace.")
@click.option("--days", type=click.IntRange(1, 3660), default=30, show_default=True, help="The last N UTC days.")
@json_option
@pass_app
def drops(app: App, workspace_id: str | None, days: int) -> None:
    """Dropped callbacks per workspace, vendor, reason and day: what to fix when a vendor's counts and ours differ."""
    since = utcnow().date() - timedelta(days=days - 1)
    with app.database.read() as conn:
        if workspace_id is None:
            rows = repository.drops_for_operator(conn, since=since)
        else:
            rows = repository.drops(conn, workspace_id=workspace_id, since=since)
    listed = [
        {
            "workspace_id": r.workspace_id,
            "vendor": r.vendor,
            "reason": r.reason,
            "day": r.day.isoformat(),
            "count": r.count,
            "last_dropped_at": r.last_dropped_at.isoformat(),
        }
        for r in rows
    ]
    totals: dict[str, int] = {}
    for r in rows:
        totals[r.reason] = totals.get(r.reason, 0) + r.count
    lines = [f"{r.day}  {r.workspace_id}  {r.vendor}  {r.reason}: {r.count}" for r in rows]
    app.emit(
        {"since": since.isoformat(), "totals": totals, "drops": listed},
        "\n".join(lines) if lines else f"no callbacks dropped since {since}",
    )
