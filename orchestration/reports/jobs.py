"""The six-hourly refresh of the reports: one run over the days whose inputs changed.

`REPORTS_SELECTION` is what `flokit refresh` selects after ingest; `refresh_run_request` is the
one place that decides which days a refresh touches (those whose raw partition is newer than
their derived partition), used by the schedule and by `refresh_reports`.
"""

from __future__ import annotations

from datetime import date

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from orchestration.reports.assets import GROUP
from orchestration.resources import LakeResource
from warehouse.lake import Lake
from warehouse.reports import store

REPORTS_SELECTION = dg.AssetSelection.groups(GROUP)
REPORTS_JOB = "refresh_reports"
# Spec limits: "report refresh: every 6 hours".
REFRESH_CRON = "0 */6 * * *"

reports_job = dg.define_asset_job(REPORTS_JOB, selection=REPORTS_SELECTION, description="Refresh the reports.")


def range_tags(days: list[date]) -> dict[str, str]:
    """Tags that make one run cover the daily partitions from the first to the last day."""
    return {
        ASSET_PARTITION_RANGE_START_TAG: min(days).isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: max(days).isoformat(),
    }


def refresh_run_request(lake: Lake) -> dg.RunRequest | dg.SkipReason:
    days = store.stale_days(lake)
    if not days:
        return dg.SkipReason("no canonical_events or spend_raw partition changed since the last refresh")
    return dg.RunRequest(tags=range_tags(days))


@dg.schedule(cron_schedule=REFRESH_CRON, job=reports_job, execution_timezone="UTC", description="Six-hourly reports.")
def reports_schedule(context: dg.ScheduleEvaluationContext, lake: LakeResource) -> dg.RunRequest | dg.SkipReason:
    return refresh_run_request(lake.lake())
