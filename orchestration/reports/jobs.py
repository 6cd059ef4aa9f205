"""The six-hourly refresh of the reports: one run over the days whose inputs changed.

`REPORTS_SELECTION` is what `flokit refresh` selects after ingest; `refresh_run_request` is the
one place that decides which days a refresh touches (those whose raw partition is newer than
their derived partition), used by the schedule and by `refresh_reports`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from orchestration.events.sensors import requestable_days
from orchestration.partitions import range_tags
from orchestration.reports.assets import GROUP
from orchestration.resources import DatabaseResource, LakeResource
from warehouse.events.landing import pending_days
from warehouse.lake import Lake
from warehouse.reports import serving, store

REPORTS_SELECTION = dg.AssetSelection.groups(GROUP)
REPORTS_JOB = "refresh_reports"
# Spec limits: "report refresh: every 6 hours".
REFRESH_CRON = "0 */6 * * *"

reports_job = dg.define_asset_job(REPORTS_JOB, selection=REPORTS_SELECTION, description="Refresh the reports.")


def refresh_run_request(lake: Lake) -> dg.RunRequest | dg.SkipReason:
    days = store.stale_days(lake)
    if not days:
        return dg.SkipReason("no canonical_events or spend_raw partition changed since the last refresh")
    return dg.RunRequest(tags=range_tags(days))


@dg.schedule(
    cron_schedule=REFRESH_CRON,
    job=reports_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,  # spec: refreshed every 6 hours, no one has to switch it on
    description="Six-hourly reports.",
)
def reports_schedule(context: dg.ScheduleEvaluationContext, lake: LakeResource) -> dg.RunRequest | dg.SkipReason:
    return refresh_run_request(lake.lake())


@dg.sensor(
    job=reports_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="First reports as soon as data exists.",
)
def reports_first_refresh(
    context: dg.SensorEvaluationContext, lake: LakeResource, database: DatabaseResource
) -> dg.RunRequest | dg.SkipReason:
    """A newcomer (`flokit up` seeds a demo history) should not wait up to six hours for the first
    reports: while nothing is published yet, refresh as soon as input days exist and every landed
    event is in the lake (a first publish from half-written days would then stand for six hours).
    After the first publish the schedule owns refreshes."""
    if serving.reports_path(lake.settings_data_dir).exists():
        return dg.SkipReason("reports already published; the six-hourly schedule refreshes them")
    with database.database().read() as conn:
        # Only days the lake has (yet): an event stamped for tomorrow waits for its day, and
        # must not hold back the first reports until then.
        if requestable_days(pending_days(conn), datetime.now(UTC).date()):
            return dg.SkipReason("landed events are still being written to canonical_events")
    request = refresh_run_request(lake.lake())
    if isinstance(request, dg.SkipReason):
        return request
    # One run per distinct range: re-evaluations while it runs do not start another.
    key = "first-" + "-".join(sorted(request.tags.values()))
    return dg.RunRequest(run_key=key, tags=request.tags)


def refresh_reports(
    definitions: dg.Definitions,
    instance: dg.DagsterInstance,
    lake: Lake,
    *,
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> dg.ExecuteInProcessResult | None:
    """Bring the reports up to date now, in this process (`flokit refresh`, tests, benchmarks):
    the same run the schedule would request. None when no input day changed."""
    request = refresh_run_request(lake)
    if isinstance(request, dg.SkipReason):
        return None
    return definitions.resolve_job_def(REPORTS_JOB).execute_in_process(
        instance=instance, tags={**request.tags, **(tags or {})}, run_config=run_config, raise_on_error=False
    )
