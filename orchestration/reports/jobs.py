"""The reports' jobs and schedule: the six-hourly refresh over the days whose inputs changed, and
the freshness check on its own.

`REPORTS_SELECTION` is what `flokit refresh` selects after ingest; `refresh_run_requests` is the
one place that decides which days a refresh touches, used by the schedule, the first-refresh
sensor and `refresh_reports`: the stale days (`warehouse.reports.store.stale_days`), in blocks
of nearby days, one stale-days-only range run per block, so that a late event on an old day
costs that day and what depends on it, not a run over every day since. Only the last block's
run rebuilds the whole-table assets, once, after the others (runs of one refresh carry a tag
limited to one run at a time in the instance configs, so the queue keeps their order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from orchestration.partitions import STALE_DAYS_ONLY_TAG, day_blocks, range_tags
from orchestration.reports.assets import GROUP, TABLE_ASSETS
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


# Run tag limited to one concurrent run (tag_concurrency_limits in both instance configs): the
# block runs of one refresh run in the order requested, the whole-table assets last.
REPORTS_WRITER_TAG = "flokit/reports_writer"
TABLE_KEYS = [asset.key for asset in TABLE_ASSETS]


def refresh_run_requests(lake: Lake) -> list[dg.RunRequest] | dg.SkipReason:
    """One stale-days-only range run per block of stale days, oldest first, of the daily assets
    with stale days in the block (each step costs Dagster events, ~10 ms each on SQLite, even
    when it has nothing to do); the last also rebuilds the whole-table assets and publishes."""
    stale = store.stale_by_dataset(lake)
    if not stale:
        return dg.SkipReason("no canonical_events or spend_raw partition changed since the last refresh")
    blocks = day_blocks(set().union(*stale.values()))
    requests = []
    for i, block in enumerate(blocks):
        first, last = block[0], block[-1]
        # Every daily asset is named after the dataset it writes.
        daily = [dg.AssetKey(ds) for ds, days in stale.items() if any(first <= day <= last for day in days)]
        requests.append(
            dg.RunRequest(
                tags={**range_tags(block), STALE_DAYS_ONLY_TAG: "true", REPORTS_WRITER_TAG: "1"},
                asset_selection=daily + TABLE_KEYS if i == len(blocks) - 1 else daily,
            )
        )
    return requests


@dg.schedule(
    name="reports_schedule",
    cron_schedule=REFRESH_CRON,
    job=reports_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,  # spec: refreshed every 6 hours, no one has to switch it on
    description="Six-hourly reports.",
)
def reports_schedule(
    context: dg.ScheduleEvaluationContext, data_dir: DataDirResource
) -> list[dg.RunRequest] | dg.SkipReason:
    return refresh_run_requests(data_dir.paths.lake())


# A late install moves a user's cohort; the days that user is active are then stale too, and may
# lie outside the first round's blocks. A second round picks them up; a third is a safety margin.
MAX_ROUNDS = 3


def refresh_reports(
    definitions: dg.Definitions,
    instance: dg.DagsterInstance,
    lake: Lake,
    *,
    tags: Mapping[str, str] | None = None,
    run_config: Mapping[str, Any] | None = None,
    on_run: Callable[[dg.ExecuteInProcessResult], None] = lambda _result: None,
) -> dg.ExecuteInProcessResult | None:
    """Bring the reports up to date now, in this process (`flokit refresh`, tests, benchmarks):
    the runs the schedule would request, one after another, then again for the days a changed
    cohort marked stale outside them (at most MAX_ROUNDS times). Returns the last run (the one
    that published), or the first that failed; None when no input day changed. Every run is in
    the instance's history, and given to `on_run` as it ends."""
    last: dg.ExecuteInProcessResult | None = None
    job = definitions.resolve_job_def(reports_job.name)
    for _ in range(MAX_ROUNDS):
        requests = refresh_run_requests(lake)
        if isinstance(requests, dg.SkipReason):
            break
        for request in requests:
            last = job.execute_in_process(
                instance=instance,
                tags={**request.tags, **(tags or {})},
                run_config=run_config,
                asset_selection=request.asset_selection,
                raise_on_error=False,
            )
            on_run(last)
            if not last.success:
                return last
    return last


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
