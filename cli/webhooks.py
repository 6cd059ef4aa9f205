"""`flokit admin webhooks ...`: outbound webhook endpoints (the spec's dashboard, as commands)."""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

import click

from cli.context import App, json_option, pass_app
from clients.dns import system_resolver
from transforms.timefmt import iso_z, parse_iso8601
from transforms.webhooks.urls import InvalidUrl
from warehouse.db import utcnow
from warehouse.errors import NotFound, NotRedeliverable
from warehouse.webhooks import delivery_history, delivery_queue, endpoints
from warehouse.webhooks.endpoints import Endpoint


def _endpoint(e: Endpoint) -> dict[str, Any]:
    return {
        "endpoint_id": e.id,
        "workspace_id": e.workspace_id,
        "url": e.url,
        "events": list(e.events),
        "status": e.status,
        "standard_webhooks": e.standard_webhooks,
        "consecutive_failures": e.consecutive_failures,
        "created_at": iso_z(e.created_at),
        "disabled_at": iso_z(e.disabled_at),
    }


@click.group()
def webhooks() -> None:
    """Outbound webhook endpoints: add, list, enable, disable, rotate secrets, delivery history, redelivery."""


@webhooks.command("add")
@click.option("--workspace", "workspace_id", required=True)
@click.option(
    "--url", required=True, help="HTTPS URL resolving to public addresses (see FLOKIT_WEBHOOKS_ALLOW_PRIVATE)."
)
@click.option("--events", required=True, help="Comma-separated event types, e.g. action.approved,integration.error.")
@click.option("--standard-webhooks", is_flag=True, help="Also send Standard Webhooks headers (webhook-id, ...).")
@json_option
@pass_app
def add(app: App, workspace_id: str, url: str, events: str, standard_webhooks: bool) -> None:
    """Add an endpoint. Its signing secret is printed once; keep it for your receiver."""
    key = app.instance_key()
    try:
        with app.database.write() as conn:
            endpoint, secret = endpoints.create_endpoint(
                conn,
                workspace_id=workspace_id,
                url=url,
                events=events.split(","),
                allow_private=app.settings.webhooks_allow_private,
                instance_key=key,
                standard_webhooks=standard_webhooks,
                resolver=system_resolver,
            )
    except NotFound:
        app.fail(f"no workspace {workspace_id}")
    except (InvalidUrl, ValueError) as exc:
        app.fail(str(exc))
    app.emit({"endpoint_id": endpoint.id, "signing_secret": secret, **_endpoint(endpoint)})


@webhooks.command("list")
@click.option("--workspace", "workspace_id", required=True)
@json_option
@pass_app
def list_(app: App, workspace_id: str) -> None:
    """Every endpoint of a workspace with its URL, events and status (enabled or disabled)."""
    with app.database.read() as conn:
        found = [_endpoint(e) for e in endpoints.list_endpoints(conn, workspace_id)]
    human = "\n".join(f"{e['endpoint_id']}  {e['status']:8}  {e['url']}  {','.join(e['events'])}" for e in found)
    app.emit({"workspace_id": workspace_id, "endpoints": found}, human or "no endpoints")


def _set_enabled(app: App, endpoint_id: str, enabled: bool) -> None:
    try:
        with app.database.write() as conn:
            endpoint = endpoints.set_enabled(conn, endpoint_id=endpoint_id, enabled=enabled)
    except NotFound:
        app.fail(f"no endpoint {endpoint_id}")
    app.emit(_endpoint(endpoint), f"endpoint {endpoint_id} {endpoint.status}")


@webhooks.command("enable")
@click.option("--endpoint", "endpoint_id", required=True)
@json_option
@pass_app
def enable(app: App, endpoint_id: str) -> None:
    """Enable an endpoint: its failure count restarts at 0 and paused deliveries resume."""
    _set_enabled(app, endpoint_id, True)


@webhooks.command("disable")
@click.option("--endpoint", "endpoint_id", required=True)
@json_option
@pass_app
def disable(app: App, endpoint_id: str) -> None:
    """Disable an endpoint: nothing is sent to it; its deliveries wait until it is enabled."""
    _set_enabled(app, endpoint_id, False)


@webhooks.command("rotate-secret")
@click.option("--endpoint", "endpoint_id", required=True)
@json_option
@pass_app
def rotate_secret(app: App, endpoint_id: str) -> None:
    """New signing secret; the old one keeps signing too for 24 hours (two v1 values)."""
    key = app.instance_key()
    try:
        with app.database.write() as conn:
            secret, expires = endpoints.rotate_secret(conn, endpoint_id=endpoint_id, instance_key=key)
    except NotFound:
        app.fail(f"no endpoint {endpoint_id}")
    app.emit({"endpoint_id": endpoint_id, "signing_secret": secret, "previous_secret_expires_at": iso_z(expires)})


@webhooks.command("deliveries")
@click.option("--endpoint", "endpoint_id", required=True)
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@json_option
@pass_app
def deliveries_(app: App, endpoint_id: str, limit: int) -> None:
    """Delivery history, newest first: event id, delivery id, attempt, status code, error, times."""
    with app.database.read() as conn:
        try:
            endpoints.endpoint_for_operator(conn, endpoint_id)
        except NotFound:
            app.fail(f"no endpoint {endpoint_id}")
        found = delivery_history.history(conn, endpoint_id=endpoint_id, limit=limit)
    human = "\n".join(
        f"{d.created_at}  {d.delivery_id}  {d.event_id}  {d.event_type}  {d.status}  "
        f"attempt {d.attempt}  {d.status_code or ''} {d.error or ''}".rstrip()
        for d in found
    )
    app.emit({"endpoint_id": endpoint_id, "deliveries": [asdict(d) for d in found]}, human or "no deliveries")


def _since(text: str | None) -> datetime | None:
    """ISO 8601 (a date or a timestamp, UTC unless an offset is given), or a duration back from
    now: `90m`, `24h`, `7d`."""
    if text is None:
        return None
    found = re.fullmatch(r"(\d{1,6})([mhd])", text.strip())
    if found:
        unit = {"m": "minutes", "h": "hours", "d": "days"}[found.group(2)]
        return utcnow() - timedelta(**{unit: int(found.group(1))})
    try:
        return parse_iso8601(text.strip())
    except ValueError as exc:
        raise click.BadParameter(f"{exc}, or a duration such as 24h or 7d", param_hint="--since") from None


@webhooks.command("redeliver")
@click.option("--endpoint", "endpoint_id", required=True)
@click.option("--since", help="Only deliveries that failed at or after this: ISO 8601, or 90m, 24h, 7d back from now.")
@click.option("--delivery", "delivery_id", help="Only this delivery (dlv_...).")
@json_option
@pass_app
def redeliver(app: App, endpoint_id: str, since: str | None, delivery_id: str | None) -> None:
    """Send deliveries that failed for good once more: the same frozen event (same ids and body),
    the next attempt number. Pending deliveries need nothing: they are retried on their own."""
    after = _since(since)
    try:
        with app.database.write() as conn:
            ids = delivery_queue.redeliver(
                conn, endpoint_id=endpoint_id, now=utcnow(), since=after, delivery_id=delivery_id
            )
            status = endpoints.endpoint_for_operator(conn, endpoint_id).status
    except NotFound:
        app.fail(f"no endpoint {endpoint_id}")
    except NotRedeliverable as exc:
        app.fail(str(exc))
    waiting = " (the endpoint is disabled: they wait until it is enabled)" if status == "disabled" and ids else ""
    app.emit(
        {"endpoint_id": endpoint_id, "endpoint_status": status, "redelivered": ids},
        f"{len(ids)} deliveries queued for redelivery{waiting}" + "".join(f"\n  {i}" for i in ids),
    )
