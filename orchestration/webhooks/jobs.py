"""The delivery job: one run drains the queue (`orchestration.webhooks.drain`).

One run sends until nothing is due or `max_run_s` has passed, so the ~2.5 s cost of launching
a run is paid per drain, never per delivery. Runs are safe to overlap: claims are leases taken
with SKIP LOCKED (PostgreSQL) or under BEGIN IMMEDIATE (SQLite).
"""

import dagster as dg

from orchestration.resources import DatabaseResource, InstanceKeyResource
from orchestration.webhooks.drain import drain
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue


@dg.op(description="Claim due webhook deliveries, send them concurrently, record each send as it completes.")
def deliver_webhooks(
    context: dg.OpExecutionContext,
    database: DatabaseResource,
    webhook_queue: WebhookQueue,
    webhook_http: WebhookHttpClient,
    instance_key: InstanceKeyResource,
) -> dg.Output[None]:
    report = drain(database.database(), webhook_queue, webhook_http, context.log, instance_key.key())
    context.log.info(f"webhook sends: {dict(report.counts)}")
    return dg.Output(
        None,
        metadata={
            "sends": report.sends,
            "succeeded": report.counts["succeeded"],
            "retry_scheduled": report.counts["pending"],
            "failed_for_good": report.counts["failed"],
            "lease_lost": report.counts["lost"],
            "held_back": report.counts["held_back"],  # claimed, unsent: their endpoint kept failing
            "endpoints_disabled": dg.MetadataValue.json(report.disabled),
        },
    )


@dg.job(
    description="Drain due webhook deliveries (requested by webhook_deliveries_sensor).",
    # A queue drain is one op doing I/O: the in-process executor avoids a subprocess per op.
    executor_def=dg.in_process_executor,
    tags={"flokit/queue": "webhooks"},
)
def webhook_deliveries_job() -> None:
    deliver_webhooks()
