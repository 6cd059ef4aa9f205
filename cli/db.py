"""`flokit db ...`: the operational database's schema."""

from __future__ import annotations

import click

from cli.context import load_settings, open_database
from cli.output import emit
from warehouse import migrate
from warehouse.db import Database
from warehouse.durability import durability_warnings


@click.group()
def db() -> None:
    """Operational database."""


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def upgrade(as_json: bool) -> None:
    """Apply every pending migration."""
    settings = load_settings()
    database = open_database(settings)
    before = migrate.current(database)
    after = migrate.upgrade(database)
    warnings = warn_if_not_durable(database)
    emit(
        {"database": _redacted(settings.database_url), "from": before, "to": after, "durability_warnings": warnings},
        as_json,
        f"database migrated to {', '.join(after)} (was {', '.join(before) or 'empty'})",
    )


def warn_if_not_durable(database: Database) -> list[str]:
    """Name, on stderr, each server setting under which acknowledged writes can be lost."""
    warnings = durability_warnings(database)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    return warnings


def _redacted(url: str) -> str:
    """A URL fit for printing: any password replaced."""
    scheme, sep, rest = url.partition("://")
    creds, at, host = rest.rpartition("@")
    if not at or ":" not in creds:
        return url
    return f"{scheme}{sep}{creds.split(':', 1)[0]}:***@{host}"
