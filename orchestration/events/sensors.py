"""The landed-events sensor and the daily dedup-claim pruning schedule.

The sensor requests ONE run covering every UTC day with pending landed rows (a partition range;
the asset rewrites only the days that changed), keyed by a fingerprint of the pending state
(each day and its highest pending seq): the same pending state always gives the same run key
(Dagster runs it once), a new row anywhere gives a new key. One run per batch, not per day:
starting a run costs seconds, rewriting a day milliseconds, and a demo seed or a vendor's
backfill leaves dozens of days pending at once. Runs carry a tag that the instance's run
coordinator limits to one at a time, so two runs never rewrite one day's file out of order.
"""

import hashlib
from datetime import UTC, date, datetime, timedelta

import dagster as dg
from dagster import OpExecutionContext  # no __future__ annotations here: Dagster inspects the real type

from orchestration.events.assets import canonical_events
from orchestration.partitions import LAKE_START_DATE, range_tags
from orchestration.resources import DatabaseResource
from warehouse.events.landing import pending_days, prune_claims

# Run tag limited to one concurrent run (tag_concurrency_limits in both instance configs).
EVENTS_WRITER_TAG = "flokit/canonical_events_writer"
# Spec "Limits": ingest dedup window 30 days.
DEDUP_WINDOW = timedelta(days=30)

canonical_events_job = dg.define_asset_job(
    "canonical_events_job",
    selection=[canonical_events],
    description="Rewrite the canonical_events partitions of the requested UTC days.",
)


def requestable_days(pending: dict[date, int], today: date) -> dict[date, int]:
    """Pending days that are partitions (ingest drops earlier ones; later ones wait for their day)."""
    start = date.fromisoformat(LAKE_START_DATE)
    return {day: seq for day, seq in sorted(pending.items()) if start <= day <= today}


def run_key(pending: dict[date, int]) -> str:
    """The same pending state, the same key. Not a seq high-water mark: on PostgreSQL a lower
    seq can commit after a higher one was seen, which changes one day's entry but not the max."""
    state = ",".join(f"{day.isoformat()}:{seq}" for day, seq in sorted(pending.items()))
    return f"canonical_events:{hashlib.sha256(state.encode()).hexdigest()[:24]}"


def events_run_request(pending: dict[date, int]) -> dg.RunRequest:
    return dg.RunRequest(run_key=run_key(pending), tags={**range_tags(pending), EVENTS_WRITER_TAG: "1"})


def build_landed_events_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    @dg.sensor(
        name="landed_events_sensor",
        job=canonical_events_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests one canonical_events run over every UTC day with newly landed events.",
    )
    def landed_events_sensor(
        context: dg.SensorEvaluationContext, database: DatabaseResource
    ) -> dg.SensorResult | dg.SkipReason:
        with database.database().read() as conn:
            pending = requestable_days(pending_days(conn), datetime.now(UTC).date())
        if not pending:
            return dg.SkipReason("no newly landed events")
        request = events_run_request(pending)
        # The cursor is the pending state already requested: a run in flight is not asked for twice.
        if request.run_key == context.cursor:
            return dg.SkipReason("a run for these landed events was already requested")
        return dg.SensorResult(run_requests=[request], cursor=request.run_key)

    return landed_events_sensor


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
    name="prune_dedup_claims_daily",
    job=prune_dedup_claims_job,
    cron_schedule="17 3 * * *",  # daily, off the hour, when ingest traffic is lowest
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)


def build_defs(sensor_interval_s: int) -> dg.Definitions:
    return dg.Definitions(
        assets=[canonical_events],
        jobs=[canonical_events_job, prune_dedup_claims_job],
        sensors=[build_landed_events_sensor(sensor_interval_s)],
        schedules=[prune_dedup_claims_schedule],
    )
