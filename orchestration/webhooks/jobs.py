"""The delivery job: claim due deliveries, send them concurrently, record every send.

One run drains rounds of `batch_size` until nothing is due or `max_run_s` has passed, so the
~2.5 s cost of launching a run is paid per batch, never per delivery. Runs are safe to overlap:
claims are leases taken with SKIP LOCKED (PostgreSQL) or under BEGIN IMMEDIATE (SQLite).
"""

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import dagster as dg

from orchestration.resources import DatabaseResource
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from transforms.webhooks.signing import request_headers
from warehouse.webhooks import deliveries
from warehouse.webhooks.deliveries import Claimed, SendResult


def send(claimed: Claimed, http: WebhookHttpClient, queue: WebhookQueue) -> SendResult:
    """One physical send, signed at send time (fresh timestamp and signatures every attempt)."""
    started = queue.now()
    headers = request_headers(
        body=claimed.body,
        secrets=claimed.secrets,
        now_ms=int(started.timestamp() * 1000),
        event_id=claimed.event_id,
        delivery_id=claimed.delivery_id,
        attempt=claimed.attempt,
        standard_webhooks=claimed.standard_webhooks,
    )
    status_code, error = http.post(url=claimed.url, body=claimed.body, headers=headers)
    return SendResult(status_code=status_code, error=error, started_at=started, finished_at=queue.now())


@dg.op(description="Claim due webhook deliveries, send them concurrently, record each attempt and schedule retries.")
def deliver_webhooks(
    context: dg.OpExecutionContext,
    database: DatabaseResource,
    webhook_queue: WebhookQueue,
    webhook_http: WebhookHttpClient,
) -> dg.Output[None]:
    db = database.database()
    scale = webhook_queue.scale()
    deadline = time.monotonic() + webhook_queue.max_run_s
    counts = {"succeeded": 0, "pending": 0, "failed": 0, "lost": 0}
    disabled: list[str] = []
    with ThreadPoolExecutor(max_workers=webhook_queue.max_workers, thread_name_prefix="webhook") as pool:
        while time.monotonic() < deadline:
            with db.write() as conn:
                batch = deliveries.claim(
                    conn,
                    now=webhook_queue.now(),
                    limit=webhook_queue.batch_size,
                    lease=timedelta(seconds=webhook_queue.lease_s),
                )
            if not batch:
                break
            futures = [pool.submit(send, c, webhook_http, webhook_queue) for c in batch]
            results = [f.result() for f in futures]
            # One transaction per round, not per send: SQLite commits dominate otherwise.
            with db.write() as conn:
                outcomes = deliveries.record_batch(conn, list(zip(batch, results, strict=True)), backoff_scale=scale)
            for claimed, outcome in zip(batch, outcomes, strict=True):
                counts[outcome.status] += 1
                if outcome.endpoint_disabled:
                    disabled.append(claimed.endpoint_id)
                    context.log.warning(f"endpoint {claimed.endpoint_id} disabled after repeated failures")
    context.log.info(f"webhook sends: {counts}")
    return dg.Output(
        None,
        metadata={
            "sends": sum(counts.values()),
            "succeeded": counts["succeeded"],
            "retry_scheduled": counts["pending"],
            "failed_for_good": counts["failed"],
            "lease_lost": counts["lost"],
            "endpoints_disabled": dg.MetadataValue.json(disabled),
        },
    )


@dg.job(
    description="Drain due webhook deliveries (requested by the webhook_deliveries sensor).",
    # A queue drain is one op doing I/O: the in-process executor avoids a subprocess per op.
    executor_def=dg.in_process_executor,
    tags={"flokit/queue": "webhooks"},
)
def deliver_webhooks_job() -> None:
    deliver_webhooks()
