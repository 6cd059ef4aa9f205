"""The sensor that turns due deliveries into ONE drain run, never one run per delivery."""

from datetime import timedelta

import dagster as dg

from orchestration.resources import DatabaseResource
from orchestration.webhooks.jobs import deliver_webhooks_job
from orchestration.webhooks.resources import WebhookQueue
from warehouse.db import utcnow
from warehouse.webhooks.deliveries import due_fingerprint

# Run keys also carry the 5-minute window, so a due set whose run never started (or died before
# claiming anything) gets a fresh run at the latest one window later instead of never.
RETRY_WINDOW_S = 300
# A drain run in these states will claim whatever is due now: a waiting run when it starts, a
# started one in its next round (it loops until nothing is due). Requesting another would only
# launch a process (~2.5 s of CPU on these machines) to compete with it. Runs created longer ago
# than a run may last (plus a margin) are not counted, so a run whose process died unnoticed
# delays delivery by minutes at most, never forever.
_BUSY = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]
_BUSY_MARGIN_S = 30


def build_webhook_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    @dg.sensor(
        name="webhook_deliveries",
        job=deliver_webhooks_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests a deliver_webhooks_job run when webhook deliveries are due.",
    )
    def webhook_deliveries(
        context: dg.SensorEvaluationContext, database: DatabaseResource, webhook_queue: WebhookQueue
    ) -> dg.SensorResult | dg.SkipReason:
        now = webhook_queue.now()
        with database.database().read() as conn:
            count, fingerprint = due_fingerprint(conn, now)
        if fingerprint is None:
            return dg.SkipReason("no webhook deliveries due")
        recent = utcnow() - timedelta(seconds=webhook_queue.max_run_s + _BUSY_MARGIN_S)  # Dagster's clock: real
        busy = context.instance.get_runs_count(
            dg.RunsFilter(job_name=deliver_webhooks_job.name, statuses=_BUSY, created_after=recent)
        )
        if busy:
            return dg.SkipReason(f"{count} deliveries due; a drain run is already queued or draining")
        key = f"webhooks-{fingerprint}-{int(now.timestamp()) // RETRY_WINDOW_S}"
        if key == context.cursor:
            return dg.SkipReason(f"a run was already requested for these {count} due deliveries")
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=key, tags={"flokit/due_deliveries": str(count)})], cursor=key
        )

    return webhook_deliveries
