"""Whether a queued piece of work (an integration's sync, an ad account's "Sync now" request) was
abandoned by the run that should have ended it.

The web app writes a row and a sensor starts a run tagged with the row's id; the run ends the row.
A run can still end without doing so (a crash before its first write, a cancel from the Dagster UI,
a process killed and its run failed by `orchestration.liveness`), vanish (a new instance), or hang.
The sensors and `flokit refresh` sweep the open rows with this one rule, so no row stays open for good.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import dagster as dg

ENDED_RUN_STATUSES = frozenset({dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.SUCCESS})


def abandoned_reason(
    instance: dg.DagsterInstance,
    *,
    tag: str,
    row_id: str,
    status: str,
    started_at: datetime | None,
    now: datetime,
    max_running: timedelta,
    run_id: str | None = None,
) -> str | None:
    """Why the open row `row_id` is abandoned (its latest run, tagged `tag`, ended; the run
    `run_id` that took it is not in the instance; or it has been `running` longer than
    `max_running`), or None while it may still be ended by its run."""
    runs = instance.get_runs(dg.RunsFilter(tags={tag: row_id}), limit=1)
    if runs and runs[0].status in ENDED_RUN_STATUSES:
        return f"its run {runs[0].run_id} ended ({runs[0].status.value}) without finishing the sync"
    if status == "running" and run_id is not None and not instance.has_run(run_id):
        # The instance was replaced or its run deleted: nothing will ever end the row.
        return f"its run {run_id} is not in the Dagster instance"
    if status == "running" and started_at is not None and now - started_at > max_running:
        return f"it was still running after {max_running}; its run is presumed dead"
    return None
