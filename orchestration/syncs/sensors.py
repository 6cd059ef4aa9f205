"""The sensors of the syncs: queued rows become runs, and no sync is left `running` for good.

`integration_sync_sensor` first queues the scheduled syncs that are due (each integration's
cadence is stored on its row, not written here), then requests one run per queued sync with
`run_key` = the sync id, so a sync is run at most once however often the sensor sees it. It also
sweeps: a sync whose run has ended (failed, canceled, or killed and marked failed by run
monitoring or `orchestration.liveness`) or vanished from the instance while the row still says
queued or running is marked failed, as is one running for longer than any sync may take; the
schedule queues the next one when the integration's cadence comes round, `flokit refresh` at once.
`integration_sync_failure_sensor` does the same at once when a run fails. Both are built by
`orchestration.queue.RunQueue` from the spec `SYNCS` below.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from orchestration.queue import RunQueue
from orchestration.syncs.jobs import (
    INTEGRATION_TAG,
    PROVIDER_TAG,
    SYNC_TAG,
    integration_sync_job,
    sync_run_config,
)
from warehouse.db import Connection, Database
from warehouse.integrations import repository as repo

# Longer than any sync should take (the largest benchmark sync is under a minute; a RevenueCat
# reconciliation of 100 000 customers paced at 480/min is about 3.5 h): past it, the run is
# presumed dead.
MAX_SYNC = timedelta(hours=8)


def sync_run_request(sync: repo.Sync, integration_type: str) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=sync.id,
        run_config=sync_run_config(sync.id),
        tags={SYNC_TAG: sync.id, INTEGRATION_TAG: sync.integration_id, PROVIDER_TAG: integration_type},
    )


def _queue_due(context: dg.SensorEvaluationContext, db: Database) -> None:
    """Queue the scheduled syncs that are due (a read first: the write lock only when needed)."""
    with db.read() as conn:
        due = repo.due_integrations(conn)
    if not due:
        return
    with db.write() as conn:
        scheduled = repo.enqueue_due(conn)
    if scheduled:
        context.log.info(f"queued {len(scheduled)} scheduled sync(s): {', '.join(scheduled)}")


def _fail(conn: Connection, sync_id: str, reason: str) -> repo.Sync:
    message = f"the sync was abandoned: {reason}"
    return repo.finish_failure(conn, sync_id=sync_id, code=None, message=message, refused=False)


def _open_syncs(conn: Connection) -> list[repo.Sync]:
    return [s for s, _ in repo.queued_syncs(conn)] + repo.running_syncs(conn)


SYNCS: RunQueue[repo.Sync] = RunQueue(
    job=integration_sync_job,
    tag=SYNC_TAG,
    max_running=MAX_SYNC,
    run_requests=lambda conn: [sync_run_request(sync, kind) for sync, kind in repo.queued_syncs(conn)],
    open_rows=_open_syncs,
    fail=_fail,
    idle="no queued sync ({swept} abandoned sync(s) marked failed)",
    noun="sync",
    description="Queues due scheduled syncs and requests one integration_sync_job run per queued sync.",
    failure_description="Marks a sync failed when its run crashes before ending it.",
    prepare=_queue_due,
)


integration_sync_failure_sensor = SYNCS.failure_sensor()
