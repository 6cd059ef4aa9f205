"""The events domain's jobs and schedule: rewriting canonical_events days, pruning dedup claims."""

from datetime import UTC, datetime, timedelta

import dagster as dg
from dagster import OpExecutionContext  # no __future__ annotations here: Dagster inspects the real type

from orchestration.events.assets import canonical_events
from orchestration.resources import DatabaseResource
from warehouse.events.landing import prune_claims

# Spec "Limits": ingest dedup window 30 days.
DEDUP_WINDOW = timedelta(days=30)

canonical_events_job = dg.define_asset_job(
    "canonical_events_job",
    selection=[canonical_events],
    description="Rewrite the canonical_events partitions of the requested UTC days.",
    # One process per run, as every FloKit job: a Celery prefork worker may not start the step
    # processes of the multiprocess default (docs/deploy.md).
    executor_def=dg.in_process_executor,
)


@dg.op(description="Delete dedup claims older than the 30-day window.")
def prune_dedup_claims(context: OpExecutionContext, database: DatabaseResource) -> int:
    """Idempotent: deletes by age only; a second run the same day finds nothing to delete."""
    with database.database().write() as conn:
        pruned = prune_claims(conn, datetime.now(UTC) - DEDUP_WINDOW)
    context.log.info(f"pruned {pruned} dedup claims older than {DEDUP_WINDOW.days} days")
    return pruned


@dg.job(description="Daily: drop dedup claims past the 30-day window.")
def prune_dedup_claims_job() -> None:
    prune_dedup_claims()


prune_dedup_claims_schedule = dg.ScheduleDefinition(
    name="prune_dedup_claims_schedule",
    job=prune_dedup_claims_job,
    cron_schedule="17 3 * * *",  # daily, off the hour, when ingest traffic is lowest
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Daily at 03:17 UTC: prune dedup claims past the 30-day window.",
)
