"""`flokit admin notifications replay`: apply stored provider notifications again.

Every verified notification is stored raw before it is acknowledged. When applying one failed
(a bug since fixed, a store that was down) or the ledger must be rebuilt, replay decodes the
stored bytes with the same handler and applies them again: the ledger keeps the latest
statement of each purchase and canonical events land once, so replaying is always safe.
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from api.notifications.framework import PROVIDER_PATHS, Context, replay
from cli.context import App, json_option, pass_app
from transforms.timefmt import iso_z, parse_iso8601


@click.group()
def notifications() -> None:
    """Provider notifications as received: replay them into the ledger."""


def _moment(app: App, text: str) -> datetime:
    try:
        return datetime.fromtimestamp(int(text), UTC) if text.isdigit() else parse_iso8601(text)
    except (ValueError, OverflowError):
        app.fail(f"--since must be ISO 8601 or Unix seconds, got {text!r}")


@notifications.command("replay")
@click.option("--provider", required=True, type=click.Choice(sorted(PROVIDER_PATHS)))
@click.option("--since", "since_text", required=True, help="Received at or after (ISO 8601 or Unix seconds).")
@click.option("--workspace", "workspace_id", help="Only this workspace's notifications.")
@json_option
@pass_app
def replay_command(app: App, provider: str, since_text: str, workspace_id: str | None) -> None:
    """Re-apply the stored notifications of PROVIDER received since --since (oldest first)."""
    since = _moment(app, since_text)
    result = replay(Context(app.settings, app.database), provider=provider, since=since, workspace_id=workspace_id)
    app.emit(
        {
            "provider": provider,
            "since": iso_z(since),
            "applied": result.applied,
            "failed": result.failed,
            "errors": result.errors[:20],
        },
        f"{result.applied} applied, {result.failed} failed" + "".join(f"\n  {e}" for e in result.errors[:20]),
    )
    if result.failed:
        raise SystemExit(1)
