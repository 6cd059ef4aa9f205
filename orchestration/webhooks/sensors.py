"""The sensor that turns due deliveries into ONE drain run, never one run per delivery."""

import dagster as dg

from orchestration.resources import DatabaseResource
from orchestration.webhooks.jobs import deliver_webhooks_job
from orchestration.webhooks.resources import WebhookQueue
from warehouse.webhooks.deliveries import due_fingerprint

# Run keys also carry the 5-minute window, so a due set whose run never started (or died before
# claiming anything) gets a fresh run at the latest one window later instead of never.
RETRY_WINDOW_S = 300
# A run in these states has not claimed anything yet; when it starts it drains whatever is due,
# so requesting another would only lengthen the queue (each run costs ~2.5 s to launch).
_WAITING = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


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
        waiting = context.instance.get_runs_count(dg.RunsFilter(job_name=deliver_webhooks_job.name, statuses=_WAITING))
        if waiting:
            return dg.SkipReason(f"{count} deliveries due; a drain run is already waiting to start")
        key = f"webhooks-{fingerprint}-{int(now.timestamp()) // RETRY_WINDOW_S}"
        if key == context.cursor:
            return dg.SkipReason(f"a run was already requested for these {count} due deliveries")
        return dg.SensorResult(
            run_requests=[dg.RunRequest(run_key=key, tags={"flokit/due_deliveries": str(count)})], cursor=key
        )

    return webhook_deliveries
