"""`flokit db ...`: the operational database's schema."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click

from cli.context import App, json_option, pass_app
from warehouse import migrate
from warehouse.db import SQLITE_FILE_MODE, Database, sqlite_files, sqlite_path
from warehouse.durability import durability_warnings
from warehouse.instance_key import ensure_instance_key
from warehouse.settings import DATA_DIR_MODE, Settings, instance_key_for
from warehouse.signing import keys as signing_keys
from warehouse.webhooks.endpoints import seal_plaintext_secrets


@click.group()
def db() -> None:
    """Operational database."""


@db.command()
@json_option
@pass_app
def upgrade(app: App) -> None:
    """Apply every pending migration."""
    settings = app.settings
    tightened = secure_data_dir(settings)
    database = app.database
    before = migrate.current(database)
    after = migrate.upgrade(database)
    tightened += secure_data_dir(settings)  # files the upgrade itself created (-wal, -shm, .writers)
    key_file = ensure_instance_key(settings)
    seal_webhook_secrets(settings, database)
    root_kid = ensure_signing_root(settings, database)
    warnings = warn_if_not_durable(database)
    app.emit(
        {
            "database": _redacted(settings.database_url),
            "from": before,
            "to": after,
            "durability_warnings": warnings,
            "tightened": tightened,
            "instance_key": str(key_file) if key_file else "FLOKIT_SECRET_KEY",
            "signing_root_kid": root_kid,
        },
        f"database migrated to {', '.join(after)} (was {', '.join(before) or 'empty'})",
    )


def seal_webhook_secrets(settings: Settings, database: Database) -> int:
    """Seal the webhook signing secrets stored in plaintext before they were sealed (issue 30);
    how many. Here and in `flokit up`, not in a migration: the instance key is created after the
    migrations run, and a migration has no settings to read it from. Nothing to do without a key."""
    key = settings.instance_key or instance_key_for(os.environ, settings.data_dir)
    if key is None:
        return 0
    with database.write() as conn:
        count = seal_plaintext_secrets(conn, instance_key=key)
    if count:
        click.echo(f"sealed {count} webhook signing secret(s) stored in plaintext", err=True)
    return count


def ensure_signing_root(settings: Settings, database: Database) -> str | None:
    """Create the root key that signs entitlement answers' intermediates when there is none
    (issue 36); its kid. After the migrations, like the sealing above: the root is sealed with the
    instance key, which only exists once `ensure_instance_key` ran. Apps pin its public key
    (`flokit admin signing-keys show`), so it is created once and never replaced here."""
    key = settings.instance_key or instance_key_for(os.environ, settings.data_dir)
    if key is None:
        return None
    with database.write() as conn:
        root, created = signing_keys.ensure_root(conn, instance_key=key)
    if created:
        click.echo(
            f"created the root signing key {root.kid} (pin it in apps: flokit admin signing-keys show)", err=True
        )
    return root.kid


def secure_data_dir(settings: Settings) -> list[str]:
    """Create the data directory owner-only (0700) if it is missing, and take group and other
    access away from it and from the SQLite files (0600): they hold the webhook signing secrets.
    Each change is named on stderr and returned; a path FloKit may not change is warned about."""
    settings.data_dir.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    database = sqlite_path(settings.database_url)
    wanted: list[tuple[Path, int]] = [(settings.data_dir, DATA_DIR_MODE)]
    wanted += [(path, SQLITE_FILE_MODE) for path in (sqlite_files(database) if database else [])]
    changed = []
    for path, mode in wanted:
        try:
            current = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if not current & 0o077:
            continue
        try:
            os.chmod(path, mode)
        except OSError as exc:
            click.echo(
                f"warning: {path} is readable by others ({current:04o}) and could not be tightened: {exc}", err=True
            )
            continue
        changed.append(f"{path}: {current:04o} -> {mode:04o}")
        click.echo(f"tightened permissions of {changed[-1]}", err=True)
    return changed


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
