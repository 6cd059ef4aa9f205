"""The sensor that keeps the webhook drains running.

Deployed (`WebhookQueue.lifetime_s` > 0): it keeps two long-lived drain runs alive, one per slot
(`transforms.webhooks.drain_slots`), whether or not anything is due, and relaunches a slot whose
run ended or died. Liveness is the slot's heartbeat (`warehouse.webhooks.drains`), not Dagster's
run status, which the default launcher leaves STARTED for a killed run.

In process (lifetime 0): it turns due deliveries into ONE short drain run, never one per delivery.
"""

from datetime import datetime, timedelta

import dagster as dg

from orchestration.resources import DatabaseResource
from orchestration.webhooks.jobs import SLOT_TAG, webhook_deliveries_job
from orchestration.webhooks.resources import WebhookQueue
from transforms.webhooks.drain_slots import SLOTS
from warehouse.db import utcnow
from warehouse.webhooks import drains
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
# A long-lived drain run that started but never beat (killed while starting) is trusted this
# long after it started; a run waiting to start, as long as run monitoring lets it wait.
_SLOT_START_GRACE_S = 60
_SLOT_WAITING_S = 180 + _WAITING_MARGIN_S  # the instances' run_monitoring start_timeout_seconds
# The backstop: Dagster's run monitoring ends a drain run this long past its lifetime (it exits
# by itself at its end; this catches one that hangs). Needs run_monitoring enabled (it is in
# every instance file FloKit writes).
_MAX_RUNTIME_MARGIN_S = 300


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
        if webhook_queue.lifetime_s > 0:
            return _keep_slots_alive(context.instance, webhook_queue, database)
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


def _keep_slots_alive(
    instance: dg.DagsterInstance, queue: WebhookQueue, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    """A run for each slot with no live run: none beating, none waiting to start, none just
    started. Run keys are unique per launch (`drain-<slot>-<ms>`): a slot is relaunched as often
    as its runs end."""
    now = utcnow()
    with database.database().read() as conn:
        beats = drains.slots(conn)
    requests = []
    for slot in SLOTS:
        beat = beats.get(slot)
        if beat is not None and beat.alive(now, queue.stale_after_s):
            continue
        if _slot_starting(instance, slot, beat.run_id if beat else None, now):
            continue
        requests.append(
            dg.RunRequest(
                run_key=f"drain-{slot}-{int(now.timestamp() * 1000)}",
                tags={SLOT_TAG: slot, "dagster/max_runtime": str(int(queue.lifetime_s + _MAX_RUNTIME_MARGIN_S))},
            )
        )
    if not requests:
        return dg.SkipReason(f"webhook drain slots {', '.join(SLOTS)} alive")
    return dg.SensorResult(run_requests=requests)


def _slot_starting(instance: dg.DagsterInstance, slot: str, beating_run: str | None, now: datetime) -> bool:
    """A run of the slot waits to start, or started lately and has not beaten yet (a run that
    beat and went quiet is dead, whatever its status says)."""
    job, tags = webhook_deliveries_job.name, {SLOT_TAG: slot}
    waiting = dg.RunsFilter(
        job_name=job, tags=tags, statuses=_WAITING, created_after=now - timedelta(seconds=_SLOT_WAITING_S)
    )
    if instance.get_runs_count(waiting):
        return True
    # By when it STARTED (its last update), not when it was created: under load a queued run may
    # wait a minute to start, and it beats only a moment after starting.
    started = dg.RunsFilter(
        job_name=job,
        tags=tags,
        statuses=[dg.DagsterRunStatus.STARTED],
        updated_after=now - timedelta(seconds=_SLOT_START_GRACE_S),
    )
    return any(run.run_id != beating_run for run in instance.get_runs(started))
