"""The sensors of the syncs: queued rows become runs, and no sync is left `running` for good.

`integration_syncs_sensor` first queues the scheduled syncs that are due (each integration's
cadence is stored on its row, not written here), then requests one run per queued sync with
`run_key` = the sync id, so a sync is run at most once however often the sensor sees it. It also
sweeps: a sync whose run has ended (failed, canceled, or killed and marked failed by run
monitoring or `orchestration.liveness`) or vanished from the instance while the row still says
queued or running is marked failed, as is one running for longer than any sync may take; the
schedule queues the next one when the integration's cadence comes round, `flokit refresh` at once.
`integration_sync_failure_sensor` does the same at once when a run fails.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from orchestration.abandoned import abandoned_reason
from orchestration.resources import DatabaseResource
from orchestration.syncs.jobs import (
    INTEGRATION_TAG,
    PROVIDER_TAG,
    SYNC_TAG,
    integration_sync_job,
    sync_run_config,
)
from warehouse.db import Database, utcnow
from warehouse.errors import TransitionRefused
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


def build_sync_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    """Built at the composition root: the interval is the deployment's FLOKIT_SENSOR_INTERVAL_S."""

    @dg.sensor(
        name="integration_syncs_sensor",
        job=integration_sync_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Queues due scheduled syncs and requests one integration_sync_job run per queued sync.",
    )
    def integration_syncs_sensor(
        context: dg.SensorEvaluationContext, database: DatabaseResource
    ) -> dg.SensorResult | dg.SkipReason:
        db = database.database()
        with db.read() as conn:
            due = repo.due_integrations(conn)
        scheduled = []
        if due:
            with db.write() as conn:
                scheduled = repo.enqueue_due(conn)
        if scheduled:
            context.log.info(f"queued {len(scheduled)} scheduled sync(s): {', '.join(scheduled)}")
        swept = sweep_abandoned(context.instance, database)
        with db.read() as conn:
            queued = repo.queued_syncs(conn)
        if not queued:
            return dg.SkipReason(f"no queued sync ({swept} abandoned sync(s) marked failed)")
        return dg.SensorResult(run_requests=[sync_run_request(sync, kind) for sync, kind in queued])

    return integration_syncs_sensor


def sweep_abandoned(instance: dg.DagsterInstance, database: DatabaseResource) -> int:
    """Mark failed the syncs whose run ended without ending them; returns how many."""
    return len(fail_abandoned(instance, database.database()))


def fail_abandoned(instance: dg.DagsterInstance, db: Database) -> list[repo.Sync]:
    """Mark failed every open sync whose run ended, vanished from the instance, or has run for
    longer than MAX_SYNC; returns them as they ended (`flokit refresh` queues them again)."""
    now = utcnow()
    with db.read() as conn:
        active = [s for s, _ in repo.queued_syncs(conn)] + repo.running_syncs(conn)
    ended = []
    for sync in active:
        reason = abandoned_reason(
            instance,
            tag=SYNC_TAG,
            row_id=sync.id,
            status=sync.status,
            started_at=sync.started_at,
            now=now,
            max_running=MAX_SYNC,
            run_id=sync.run_id,
        )
        if reason is not None and (failed := _fail(db, sync.id, reason)) is not None:
            ended.append(failed)
    return ended


def _fail(db: Database, sync_id: str, reason: str) -> repo.Sync | None:
    try:
        with db.write() as conn:
            return repo.finish_failure(
                conn, sync_id=sync_id, code=None, message=f"the sync was abandoned: {reason}", refused=False
            )
    except TransitionRefused:
        return None  # it ended meanwhile


@dg.run_failure_sensor(
    name="integration_sync_failure_sensor",
    monitored_jobs=[integration_sync_job],
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Marks a sync failed when its run crashes before ending it.",
)
def integration_sync_failure_sensor(context: dg.RunFailureSensorContext, database: DatabaseResource) -> None:
    sync_id = context.dagster_run.tags.get(SYNC_TAG)
    if not sync_id:
        return
    message = context.failure_event.message or "the run failed"
    if _fail(database.database(), sync_id, f"its run {context.dagster_run.run_id} failed: {message}"):
        context.log.info(f"sync {sync_id} marked failed")
