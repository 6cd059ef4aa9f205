"""The landed-events sensor.

It requests one run per block of nearby UTC days with pending landed rows (a partition range;
the asset rewrites only the days that changed; `orchestration.partitions.day_blocks`), each
keyed by a fingerprint of its days' pending state (each day and its highest pending seq): the
same pending state always gives the same run key (Dagster runs it once), a new row gives a new
key. One run per block, not per day: starting a run costs seconds, rewriting a day milliseconds,
and a demo seed or a vendor's backfill leaves dozens of days pending at once. Not one run over
everything either: each partition of a range run costs Dagster bookkeeping, so a late event
dated two years back would make today's run walk ~700 idle days. Runs carry a tag that the
instance's run coordinator limits to one at a time, so two runs never rewrite one day's file out
of order.
"""

import hashlib
from datetime import UTC, date, datetime

import dagster as dg

from orchestration.events.jobs import canonical_events_job
from orchestration.partitions import LAKE_START_DATE, day_blocks, range_tags
from orchestration.resources import DatabaseResource
from warehouse.events.landing import pending_days

# Run tag limited to one concurrent run (tag_concurrency_limits in both instance configs).
EVENTS_WRITER_TAG = "flokit/canonical_events_writer"


def requestable_days(pending: dict[date, int], today: date) -> dict[date, int]:
    """Pending days that are partitions (ingest drops earlier ones; later ones wait for their day)."""
    start = date.fromisoformat(LAKE_START_DATE)
    return {day: seq for day, seq in sorted(pending.items()) if start <= day <= today}


def run_key(pending: dict[date, int]) -> str:
    """The same pending state, the same key. Not a seq high-water mark: on PostgreSQL a lower
    seq can commit after a higher one was seen, which changes one day's entry but not the max."""
    state = ",".join(f"{day.isoformat()}:{seq}" for day, seq in sorted(pending.items()))
    return f"canonical_events:{hashlib.sha256(state.encode()).hexdigest()[:24]}"


def events_run_requests(pending: dict[date, int]) -> list[dg.RunRequest]:
    """One range run per block of nearby pending days, oldest first."""
    requests = []
    for block in day_blocks(pending):
        state = {day: pending[day] for day in block}
        requests.append(dg.RunRequest(run_key=run_key(state), tags={**range_tags(block), EVENTS_WRITER_TAG: "1"}))
    return requests


def build_canonical_events_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    """Built at the composition root: the interval is the deployment's FLOKIT_SENSOR_INTERVAL_S."""

    @dg.sensor(
        name="canonical_events_sensor",
        job=canonical_events_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests canonical_events runs over the UTC days with newly landed events, one per block of days.",
    )
    def canonical_events_sensor(
        context: dg.SensorEvaluationContext, database: DatabaseResource
    ) -> dg.SensorResult | dg.SkipReason:
        with database.database().read() as conn:
            pending = requestable_days(pending_days(conn), datetime.now(UTC).date())
        if not pending:
            return dg.SkipReason("no newly landed events")
        # The cursor is the pending state already requested: runs in flight are not asked for twice.
        # (Named `landed_events_sensor` before issue 32: Dagster keys the cursor and the run keys
        # by sensor name, so the first tick after the rename asks once more for the blocks then
        # pending; the writer tag runs them one at a time and a range run rewrites only changed days.)
        state = run_key(pending)
        if state == context.cursor:
            return dg.SkipReason("runs for these landed events were already requested")
        return dg.SensorResult(run_requests=events_run_requests(pending), cursor=state)

    return canonical_events_sensor
