"""`flokit dagster check|repair`: the Dagster instance at DAGSTER_HOME.

`flokit up` refuses an instance whose SQLite storages hold more than one `alembic_version` row
(see `cli.dagster_instance`); these commands show that damage and repair it, with the service
stopped.
"""

from __future__ import annotations

import click

from cli.context import App, json_option, pass_app
from cli.dagster_instance import (
    REPAIR_COMMAND,
    RUNNING_LOCK,
    InstanceBusy,
    InstanceDamaged,
    find_damaged,
    holding,
    prepare_instance,
    repair_instance,
    sqlite_storages,
)


@click.group()
def dagster() -> None:
    """The Dagster instance (DAGSTER_HOME)."""


@dagster.command()
@json_option
@pass_app
def check(app: App) -> None:
    """Exit 1 when a storage of the instance is damaged, naming it and the repair."""
    home = app.settings.dagster_home
    storages = sqlite_storages(home)
    damaged = [s for s in storages if s.damaged]
    result = {
        "dagster_home": str(home),
        "storages": len(storages),
        "damaged": [{"path": str(s.path), "alembic_version": s.revisions} for s in damaged],
    }
    healthy = f"{home}: {len(storages)} storages, none damaged"
    app.emit(result, str(InstanceDamaged(home, damaged)) if damaged else healthy)
    if damaged:
        raise SystemExit(1)


@dagster.command()
@json_option
@pass_app
def repair(app: App) -> None:
    """Keep the newest alembic_version row of each damaged storage (a backup of each file is
    written beside it first), then migrate the instance. Refused while flokit up runs."""
    home = app.settings.dagster_home
    try:
        with holding(home, RUNNING_LOCK, wait=False):
            repaired = repair_instance(home) if find_damaged(home) else []
            done = prepare_instance(home, app.settings)
    except InstanceBusy as exc:
        app.fail(f"{exc}: stop flokit up, then run `{REPAIR_COMMAND}` again")
    lines = [
        f"{r.path}: alembic_version held {', '.join(r.revisions)}; kept {r.kept} (backup {r.backup.name})"
        for r in repaired
    ]
    lines.append(f"{home}: {'repaired' if repaired else 'nothing to repair'}; instance {', '.join(done)}")
    app.emit(
        {
            "dagster_home": str(home),
            "repaired": [
                {"path": str(r.path), "alembic_version": r.revisions, "kept": r.kept, "backup": str(r.backup)}
                for r in repaired
            ],
            "instance": done,
        },
        "\n".join(lines),
    )
