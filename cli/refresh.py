"""`flokit refresh`: bring the warehouse up to date now, through the Dagster instance.

For data engineers, analysts and tests who should not wait for the sensors. The runs are
recorded in the instance at DAGSTER_HOME, so they show up in the Dagster UI; exit status 1 when
any run fails. Each step is reported as it ends, with its duration (on stderr with --json);
Python warnings raised while Dagster loads the definitions go to `<data_dir>/logs/refresh.log`.
With FLOKIT_RUN_LAUNCHER=celery each run is submitted to the instance's queue (the daemon launches
it on a worker) and waited for; nothing runs in this process (orchestration/submit.py).
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path

import click

from cli.console import warnings_to
from cli.context import App, json_option, pass_app
from cli.dagster_instance import InstanceDamaged, prepare_instance
from cli.progress import Progress

ROOT = Path(__file__).resolve().parents[1]


@click.command()
@json_option
@pass_app
def refresh(app: App) -> None:
    """Run queued syncs, land events in canonical_events, refresh reports, run the actions engine, build the catalog."""
    settings = app.settings
    database = app.database
    try:
        # Created and migrated alone, as `flokit up` does: a refresh on a fresh data directory
        # while the service starts would otherwise race the daemon to initialise the instance.
        prepare_instance(settings.dagster_home, settings)
    except InstanceDamaged as exc:
        app.fail(str(exc))
    # The definitions and the instance read these at load time; make them this run's settings.
    os.environ.update(settings.child_env())
    warnings_to(settings.paths.logs / "refresh.log")

    import dagster as dg  # deferred: loading Dagster costs seconds every other command should not pay

    from orchestration.definitions import build_definitions
    from orchestration.refresh import refresh as run_refresh

    steps = Progress(app)

    def progress(line: str) -> None:
        # orchestration.refresh announces a step with "...", and reports its outcome next.
        if line.endswith("..."):
            steps.begin(line)
        else:
            steps.done(line)

    with dg.DagsterInstance.get() as instance, ExitStack() as stack:
        execute = None
        if settings.run_launcher == "celery":  # nothing runs here: each run goes to a worker, waited for
            from orchestration.submit import through_queue

            execute = stack.enter_context(through_queue(instance, ROOT / "workspace.yaml"))
        outcomes = run_refresh(build_definitions(), instance, database, settings.paths.lake(), progress, execute)
    failed = [o for o in outcomes if not o.success]
    app.emit(
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
            "catalog": settings.paths.catalog_location(),
        },
        f"refresh {'failed' if failed else 'done'}: {len(outcomes)} run(s) in {steps.elapsed():.1f} s; "
        f"catalog {settings.paths.catalog_location()}",
    )
    if failed:
        raise SystemExit(1)
