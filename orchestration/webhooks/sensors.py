"""The sensor that turns due deliveries into ONE drain run, never one run per delivery."""

from datetime import datetime, timedelta

import dagster as dg

from orchestration.resources import DatabaseResource
from orchestration.webhooks.jobs import webhook_deliveries_job
from orchestration.webhooks.resources import WebhookQueue
from warehouse.db import utcnow
from warehouse.webhooks.delivery_queue import due_fingerprint, leases_alive

# Run keys also carry the 5-minute window, so a due set whose run never started (or died before
# claiming anything) gets a fresh run at the latest one window later instead of never.
RETRY_WINDOW_S = 300
# A drain run waiting to start will claim whatever is due now; requesting another would only
# launch a process (seconds of CPU: docs/benchmarks.md) to compete with it. Runs created longer ago
# than a run may last (plus a margin) are not counted, so a run that never started delays
# delivery by minutes at most, never forever.
_WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]
_WAITING_MARGIN_S = 30
# A started run is trusted to be draining for this long after it was created (it claims within
# a second of starting); after that only its renewed leases say it is alive. The default run
# launcher cannot tell that a run's process was killed: such a run stays STARTED for good.
_STARTED_GRACE_S = 20


def build_webhook_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    """Built at the composition root: the interval is the deployment's FLOKIT_SENSOR_INTERVAL_S."""

    @dg.sensor(
        name="webhook_deliveries_sensor",
        job=webhook_deliveries_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests a webhook_deliveries_job run when webhook deliveries are due.",
    )
    def webhook_deliveries_sensor(
        context: dg.SensorEvaluationContext, database: DatabaseResource, webhook_queue: WebhookQueue
    ) -> dg.SensorResult | dg.SkipReason:
        now = webhook_queue.now()
        with database.database().read() as conn:
            count, fingerprint = due_fingerprint(conn, now)
        if fingerprint is None:
            return dg.SkipReason("no webhook deliveries due")
        if _drain_alive(context.instance, webhook_queue, database, now):
            return dg.SkipReason(f"{count} deliveries due; a drain run is already queued or draining")
        key = f"webhooks-{fingerprint}-{int(now.timestamp()) // RETRY_WINDOW_S}"
        if key == context.cursor:
            return dg.SkipReason(f"a run was already requested for these {count} due deliveries")
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=key, tags={"flokit/due_deliveries": str(count)})], cursor=key
        )

    return webhook_deliveries_sensor


def _drain_alive(instance: dg.DagsterInstance, queue: WebhookQueue, database: DatabaseResource, now: datetime) -> bool:
    """A drain run is waiting to start, has just started, or holds leases it keeps renewing."""
    real_now = utcnow()  # Dagster's clock is the real one; `now` is the queue's (tests move it)
    job = webhook_deliveries_job.name
    waiting = dg.RunsFilter(
        job_name=job, statuses=_WAITING, created_after=real_now - timedelta(seconds=queue.max_run_s + _WAITING_MARGIN_S)
    )
    started = dg.RunsFilter(
        job_name=job,
        statuses=[dg.DagsterRunStatus.STARTED],
        created_after=real_now - timedelta(seconds=_STARTED_GRACE_S),
    )
    if instance.get_runs_count(waiting) or instance.get_runs_count(started):
        return True
    with database.database().read() as conn:
        return leases_alive(conn, now)
