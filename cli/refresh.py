"""`flokit refresh`: bring the warehouse up to date now, through the Dagster instance.

For data engineers, analysts and tests who should not wait for the sensors. The runs are
recorded in the instance at DAGSTER_HOME, so they show up in the Dagster UI; exit status 1 when
any run fails.
"""

from __future__ import annotations

import os

import click

from cli.context import load_settings, open_database
from cli.dagster_instance import InstanceDamaged, prepare_instance
from cli.output import emit, fail
from warehouse.lake import Lake


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (progress goes to stderr).")
def refresh(as_json: bool) -> None:
    """Write every day with new landed events to canonical_events, refresh the reports, rebuild the catalog."""
    settings = load_settings()
    database = open_database(settings)
    try:
        # Created and migrated alone, as `flokit up` does: a refresh on a fresh data directory
        # while the service starts would otherwise race the daemon to initialise the instance.
        prepare_instance(settings.dagster_home)
    except InstanceDamaged as exc:
        fail(str(exc), as_json)
    # The definitions and the instance read these at load time; make them this run's settings.
    os.environ.update(settings.child_env())

    import dagster as dg  # deferred: loading Dagster costs seconds every other command should not pay

    from orchestration.definitions import build_definitions
    from orchestration.refresh import refresh as run_refresh

    def progress(line: str) -> None:
        click.echo(line, err=as_json)

    with dg.DagsterInstance.get() as instance:
        outcomes = run_refresh(build_definitions(), instance, database, Lake(settings.lake_dir), progress)
    failed = [o for o in outcomes if not o.success]
    emit(
        {
            "ok": not failed,
            "runs": [
                {
                    "name": o.name,
                    "run_id": o.run_id,
                    "partitions": o.partition,
                    "assets": o.assets,
                    "success": o.success,
                }
                for o in outcomes
            ],
            "catalog": str(settings.catalog_path),
        },
        as_json,
        f"refresh {'failed' if failed else 'done'}: {len(outcomes)} run(s); catalog {settings.catalog_path}",
    )
    if failed:
        raise SystemExit(1)
