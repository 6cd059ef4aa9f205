"""The reports' sensors: the first reports as soon as data exists, and the freshness check's clock."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from orchestration.events.sensors import requestable_days
from orchestration.reports.checks import MAX_AGE
from orchestration.reports.jobs import (
    payback_updated_job,
    published_reports_freshness_job,
    refresh_run_requests,
    reports_job,
)
from orchestration.resources import DatabaseResource, DataDirResource
from warehouse.events.landing import pending_days
from warehouse.reports import serving
from warehouse.reports.published import current_reports
from warehouse.webhooks import payback_updates


@dg.sensor(
    name="reports_sensor",
    job=reports_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="First reports as soon as data exists.",
)
def reports_sensor(
    context: dg.SensorEvaluationContext, data_dir: DataDirResource, database: DatabaseResource
) -> list[dg.RunRequest] | dg.SkipReason:
    """A newcomer (`flokit up` seeds a demo history) should not wait up to six hours for the first
    reports: while nothing is published yet, refresh as soon as input days exist and every landed
    event is in the lake (a first publish from half-written days would then stand for six hours).
    After the first publish the schedule owns refreshes. (Named `reports_first_refresh_sensor`
    before issue 32; it keeps no cursor, and a `first-…` run key seen under the old name is asked
    for again only while nothing is published, when that first refresh is still wanted.)"""
    paths = data_dir.paths
    if current_reports(paths).exists():
        return dg.SkipReason("reports already published; the six-hourly schedule refreshes them")
    with database.database().read() as conn:
        # Only days the lake has (yet): an event stamped for tomorrow waits for its day, and
        # must not hold back the first reports until then.
        if requestable_days(pending_days(conn), datetime.now(UTC).date()):
            return dg.SkipReason("landed events are still being written to canonical_events")
    requests = refresh_run_requests(paths.lake())
    if isinstance(requests, dg.SkipReason):
        return requests
    # One run per distinct range: re-evaluations while it runs do not start another.
    return [
        dg.RunRequest(
            run_key="first-" + "-".join(sorted(r.tags.values())), tags=r.tags, asset_selection=r.asset_selection
        )
        for r in requests
    ]


@dg.sensor(
    name="published_reports_freshness_sensor",
    job=published_reports_freshness_job,
    minimum_interval_seconds=300,  # a stale store is noticed within 5 minutes of its deadline
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates published_reports_fresh once the published reports outgrow 6 hours plus the grace.",
)
def published_reports_freshness_sensor(
    context: dg.SensorEvaluationContext, data_dir: DataDirResource
) -> dg.SensorResult | dg.SkipReason:
    """The check passes in every refresh run (the store was just published); this sensor asks for
    its evaluation when it would fail: once per published store, after `MAX_AGE`. The next
    publish's run evaluates it again (and it passes). Before the first publish there is nothing
    to be fresh: `reports_sensor` owns that time."""
    generated_at = serving.published_meta(current_reports(data_dir.paths)).generated_at
    if generated_at is None:
        return dg.SkipReason("no reports published yet")
    stale_from = generated_at + MAX_AGE
    if datetime.now(UTC) <= stale_from:
        return dg.SkipReason(f"the published reports are fresh until {stale_from.astimezone(UTC).isoformat()}")
    key = f"published_reports_stale:{generated_at.astimezone(UTC).isoformat()}"
    if context.cursor == key:
        return dg.SkipReason("the freshness check already ran on these stale reports; the next publish re-checks")
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=key)], cursor=key)


@dg.sensor(
    name="payback_updated_sensor",
    job=payback_updated_job,
    minimum_interval_seconds=300,  # a lost announcement is made within 5 minutes (the comparison is a few ms)
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Announces published payback changes that a failed refresh run left unannounced.",
)
def payback_updated_sensor(
    context: dg.SensorEvaluationContext, data_dir: DataDirResource, database: DatabaseResource
) -> dg.RunRequest | dg.SkipReason:
    """`published_reports` announces its own changes right after the swap; a run that failed in
    between (database down, process killed) would otherwise wait for the next refresh, which the
    schedule skips while no input changes. One run per published store and hour: a catch-up that
    fails too is tried again the next hour, and re-evaluations meanwhile start nothing."""
    published = serving.payback_digests(current_reports(data_dir.paths))
    if published is None:
        return dg.SkipReason("no reports published yet")
    if not payback_updates.unannounced(database.database(), published):
        return dg.SkipReason("every published payback change is announced")
    store_key = published.generated_at.astimezone(UTC).isoformat()
    return dg.RunRequest(run_key=f"payback_updated:{store_key}:{datetime.now(UTC):%Y-%m-%dT%H}")
