"""The sensors of the dashboard's "Sync now": pending requests become runs, and no request is
left open for good.

`ad_account_sync_requests_sensor` requests one `ad_accounts_sync_job` run per pending request
with `run_key` = the request id, so a request is run at most once however often the sensor sees
it. It first sweeps, as `integration_syncs_sensor` does for the integrations' syncs: a request
whose run has ended (failed, canceled, or killed and marked so by run monitoring) while the row
still says pending or running is marked failed, as is one running for longer than any registry
sync may take. `ad_account_sync_request_failure_sensor` does the same at once when a run fails.
"""

from __future__ import annotations

from datetime import timedelta

import dagster as dg

from orchestration.abandoned import abandoned_reason
from orchestration.adaccounts.jobs import ACCOUNT_TAG, REQUEST_TAG, ad_accounts_sync_job, request_run_config
from orchestration.resources import DatabaseResource
from warehouse.adaccounts import sync_requests as requests
from warehouse.db import utcnow
from warehouse.errors import TransitionRefused

# Longer than any registry sync should take: a Meta account of a few thousand objects reads in
# well under a minute at 25 per page, and the client sits out at most a few rate-limit waits
# (clients/ad_platform.py). Past it, the run is presumed dead.
MAX_SYNC = timedelta(hours=2)


def request_run(request: requests.SyncRequest) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=request.id,
        run_config=request_run_config(request.id, request.workspace_id, request.ad_account_id),
        tags={REQUEST_TAG: request.id, ACCOUNT_TAG: request.ad_account_id},
    )


def build_sync_requests_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    """Built at the composition root: the interval is the deployment's FLOKIT_SENSOR_INTERVAL_S."""

    @dg.sensor(
        name="ad_account_sync_requests_sensor",
        job=ad_accounts_sync_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests one ad_accounts_sync_job run per pending dashboard 'Sync now' request.",
    )
    def ad_account_sync_requests_sensor(
        context: dg.SensorEvaluationContext, database: DatabaseResource
    ) -> dg.SensorResult | dg.SkipReason:
        swept = sweep_abandoned(context.instance, database)
        with database.database().read() as conn:
            pending = requests.pending_requests(conn)
        if not pending:
            return dg.SkipReason(f"no pending ad account sync request ({swept} abandoned request(s) marked failed)")
        return dg.SensorResult(run_requests=[request_run(r) for r in pending])

    return ad_account_sync_requests_sensor


def sweep_abandoned(instance: dg.DagsterInstance, database: DatabaseResource) -> int:
    """Mark failed the open requests whose run ended without ending them; returns how many."""
    now = utcnow()
    with database.database().read() as conn:
        open_requests = requests.open_requests(conn)
    marked = 0
    for request in open_requests:
        reason = abandoned_reason(
            instance,
            tag=REQUEST_TAG,
            row_id=request.id,
            status=request.status,
            started_at=request.started_at,
            now=now,
            max_running=MAX_SYNC,
        )
        if reason is not None and _fail(database, request.id, reason):
            marked += 1
    return marked


def _fail(database: DatabaseResource, request_id: str, reason: str) -> bool:
    try:
        with database.database().write() as conn:
            requests.finish_failure(conn, request_id=request_id, code=None, message=f"the sync was abandoned: {reason}")
    except TransitionRefused:
        return False  # it ended meanwhile
    return True


@dg.run_failure_sensor(
    name="ad_account_sync_request_failure_sensor",
    monitored_jobs=[ad_accounts_sync_job],
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Marks a dashboard 'Sync now' request failed when its run crashes before ending it.",
)
def ad_account_sync_request_failure_sensor(context: dg.RunFailureSensorContext, database: DatabaseResource) -> None:
    request_id = context.dagster_run.tags.get(REQUEST_TAG)
    if not request_id:
        return  # a scheduled or refresh run: no request to end
    message = context.failure_event.message or "the run failed"
    if _fail(database, request_id, f"its run {context.dagster_run.run_id} failed: {message}"):
        context.log.info(f"sync request {request_id} marked failed")
