"""The reports' jobs and schedule: the six-hourly refresh over the days whose inputs changed, and
the freshness check on its own.

`REPORTS_SELECTION` is what `flokit refresh` selects after ingest; `refresh_run_request` is the
one place that decides which days a refresh touches (those whose raw partition is newer than
their derived partition), used by the schedule, the first-refresh sensor and `refresh_reports`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from orchestration.partitions import range_tags
from orchestration.reports.assets import GROUP
from orchestration.reports.checks import published_reports_fresh
from orchestration.resources import DatabaseResource, DataDirResource
from warehouse.lake import Lake
from warehouse.reports import serving, store
from warehouse.webhooks import payback_updates

REPORTS_SELECTION = dg.AssetSelection.groups(GROUP)
# Spec limits: "report refresh: every 6 hours".
REFRESH_CRON = "0 */6 * * *"

reports_job = dg.define_asset_job(
    "reports_job", selection=REPORTS_SELECTION, description="Refresh the reports over the days whose inputs changed."
)
published_reports_freshness_job = dg.define_asset_job(
    "published_reports_freshness_job",
    selection=dg.AssetSelection.checks(published_reports_fresh),
    description="Evaluate the freshness check of the published reports (requested by its sensor).",
)


def refresh_run_request(lake: Lake) -> dg.RunRequest | dg.SkipReason:
    days = store.stale_days(lake)
    if not days:
        return dg.SkipReason("no canonical_events or spend_raw partition changed since the last refresh")
    return dg.RunRequest(tags=range_tags(days))


@dg.schedule(
    name="reports_schedule",
    cron_schedule=REFRESH_CRON,
    job=reports_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,  # spec: refreshed every 6 hours, no one has to switch it on
    description="Six-hourly reports.",
)
def reports_schedule(context: dg.ScheduleEvaluationContext, data_dir: DataDirResource) -> dg.RunRequest | dg.SkipReason:
    return refresh_run_request(data_dir.paths.lake())


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
    return definitions.resolve_job_def(reports_job.name).execute_in_process(
        instance=instance, tags={**request.tags, **(tags or {})}, run_config=run_config, raise_on_error=False
    )


@dg.op(description="Announce the published payback changes no report.payback_updated event announced yet.")
def announce_payback_updates(data_dir: DataDirResource, database: DatabaseResource) -> dg.Output[None]:
    """The catch-up of `published_reports`'s own announcement, for a run that failed after its
    swap: the same comparison, on the store live now."""
    published = serving.payback_digests(data_dir.paths.reports)
    updates = payback_updates.notify_payback_updates(database.database(), published)
    return dg.Output(None, metadata={"payback_updated_events": len(updates)})


@dg.job(
    description="Announce published payback changes left unannounced (requested by payback_updated_sensor).",
    executor_def=dg.in_process_executor,  # one small op: no subprocess
)
def payback_updated_job() -> None:
    announce_payback_updates()
