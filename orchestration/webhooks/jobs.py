"""The delivery job: one run drains the queue (`orchestration.webhooks.drain`).

Deployed (`WebhookQueue.lifetime_s` > 0, FLOKIT_WEBHOOK_DRAIN_LIFETIME_S): a run is long-lived.
It holds one of two drain slots (tag `flokit/drain_slot`), waits for wake-ups between drains
(PostgreSQL LISTEN/NOTIFY, a 200 ms poll on SQLite), beats the slot's heartbeat and exits at
its planned end, staggered half a lifetime from the other slot's; the sensor relaunches it. So
a delivery waits for a wake-up and a claim, not for a sensor tick and a run launch (~2.5 s).

In process (lifetime 0: tests, scripts), or launched without a slot tag (by hand, from the
Dagster UI): one run sends until nothing is due or `max_run_s` has passed. Runs are safe to
overlap either way: claims are leases taken with SKIP LOCKED (PostgreSQL) or under BEGIN
IMMEDIATE (SQLite).
"""

from datetime import timedelta

import dagster as dg

from orchestration.resources import DatabaseResource, InstanceKeyResource
from orchestration.webhooks.drain import DrainReport, drain, serve
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from transforms.webhooks.drain_slots import SLOTS, other_slot, planned_end
from warehouse.db import utcnow
from warehouse.webhooks import drains
from warehouse.webhooks.wakeup import Wakeups

SLOT_TAG = "flokit/drain_slot"


@dg.op(description="Claim due webhook deliveries, send them concurrently, record each send as it completes.")
def deliver_webhooks(
    context: dg.OpExecutionContext,
    database: DatabaseResource,
    webhook_queue: WebhookQueue,
    webhook_http: WebhookHttpClient,
    instance_key: InstanceKeyResource,
) -> dg.Output[None]:
    db = database.database()
    slot = context.run.tags.get(SLOT_TAG)
    if webhook_queue.lifetime_s <= 0 or slot not in SLOTS:
        # In process, or launched by hand (the Dagster UI) without a slot: one short drain.
        report = drain(db, webhook_queue, webhook_http, context.log, instance_key.key())
    else:
        now = utcnow()
        with db.read() as conn:
            other = drains.slots(conn).get(other_slot(slot))
        other_ends_at = other.ends_at if other and other.alive(now, webhook_queue.stale_after_s) else None
        ends_at = planned_end(now, timedelta(seconds=webhook_queue.lifetime_s), other_ends_at)
        context.log.info(f"webhook drain slot {slot}: draining until {ends_at.isoformat()}")
        with Wakeups(db) as wakeups:
            report = serve(
                db,
                webhook_queue,
                webhook_http,
                context.log,
                instance_key.key(),
                slot=slot,
                run_id=context.run_id,
                ends_at=ends_at,
                wakeups=wakeups,
            )
    return _output(context, report)


def _output(context: dg.OpExecutionContext, report: DrainReport) -> dg.Output[None]:
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
