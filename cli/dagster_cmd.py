"""`flokit dagster check|repair`: the Dagster instance at DAGSTER_HOME.

`flokit up` refuses an instance whose SQLite storages hold more than one `alembic_version` row
(see `cli.dagster_instance`); these commands show that damage and repair it, with the service
stopped.
"""

from __future__ import annotations

import click

from cli.context import load_settings
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
from cli.output import emit, fail


@click.group()
def dagster() -> None:
    """The Dagster instance (DAGSTER_HOME)."""


@dagster.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(as_json: bool) -> None:
    """Exit 1 when a storage of the instance is damaged, naming it and the repair."""
    home = load_settings().dagster_home
    storages = sqlite_storages(home)
    damaged = [s for s in storages if s.damaged]
    result = {
        "dagster_home": str(home),
        "storages": len(storages),
        "damaged": [{"path": str(s.path), "alembic_version": s.revisions} for s in damaged],
    }
    healthy = f"{home}: {len(storages)} storages, none damaged"
    emit(result, as_json, str(InstanceDamaged(home, damaged)) if damaged else healthy)
    if damaged:
        raise SystemExit(1)


@dagster.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def repair(as_json: bool) -> None:
    """Keep the newest alembic_version row of each damaged storage (a backup of each file is
    written beside it first), then migrate the instance. Refused while flokit up runs."""
    home = load_settings().dagster_home
    try:
        with holding(home, RUNNING_LOCK, wait=False):
            repaired = repair_instance(home) if find_damaged(home) else []
            done = prepare_instance(home)
    except InstanceBusy as exc:
        fail(f"{exc}: stop flokit up, then run `{REPAIR_COMMAND}` again", as_json)
        return
    lines = [
        f"{r.path}: alembic_version held {', '.join(r.revisions)}; kept {r.kept} (backup {r.backup.name})"
        for r in repaired
    ]
    lines.append(f"{home}: {'repaired' if repaired else 'nothing to repair'}; instance {', '.join(done)}")
    emit(
        {
            "dagster_home": str(home),
            "repaired": [
                {"path": str(r.path), "alembic_version": r.revisions, "kept": r.kept, "backup": str(r.backup)}
                for r in repaired
            ],
            "instance": done,
        },
        as_json,
        "\n".join(lines),
    )
