"""Whether a queued piece of work (an integration's sync, an ad account's "Sync now" request) was
abandoned by the run that should have ended it.

The web app writes a row and a sensor starts a run tagged with the row's id; the run ends the row.
A run can still end without doing so (a crash before its first write, a cancel from the Dagster UI)
or hang. The sensors sweep their open rows with this one rule, so no row stays open for good.
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
) -> str | None:
    """Why the open row `row_id` is abandoned (its latest run, tagged `tag`, ended; or it has been
    `running` longer than `max_running`), or None while it may still be ended by its run."""
    runs = instance.get_runs(dg.RunsFilter(tags={tag: row_id}), limit=1)
    if runs and runs[0].status in ENDED_RUN_STATUSES:
        return f"its run {runs[0].run_id} ended ({runs[0].status.value}) without finishing the sync"
    if status == "running" and started_at is not None and now - started_at > max_running:
        return f"it was still running after {max_running}; its run is presumed dead"
    return None
