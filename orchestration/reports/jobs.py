"""The reports' jobs and schedule: the six-hourly refresh over the days whose inputs changed, and
the freshness check on its own.

`REPORTS_SELECTION` is what `flokit refresh` selects after ingest; `refresh_run_requests` is the
one place that decides which days a refresh touches, used by the schedule, the first-refresh
sensor and `refresh_reports`: the stale days (`warehouse.reports.report_lake.stale_days`), in blocks
of nearby days, one stale-days-only range run per block, so that a late event on an old day
costs that day and what depends on it, not a run over every day since; then the action signals,
which read ahead (cohort day D reads D..D+30), in blocks of their own. Only the last block's
run rebuilds the whole-table assets, once, after the others (runs of one refresh carry a tag
limited to one run at a time in the instance configs, so the queue keeps their order).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

import dagster as dg

from orchestration.partitions import STALE_DAYS_ONLY_TAG, day_blocks, range_tags
from orchestration.reports.assets import GROUP, TABLE_ASSETS
from orchestration.reports.checks import published_reports_fresh
from orchestration.resources import DatabaseResource, DataDirResource
from orchestration.submit import Execute
from warehouse.lake import Lake
from warehouse.reports import report_lake, serving
from warehouse.reports.published import current_reports
from warehouse.webhooks import payback_updates

REPORTS_SELECTION = dg.AssetSelection.groups(GROUP)
# Spec limits: "report refresh: every 6 hours".
REFRESH_CRON = "0 */6 * * *"

# In-process, as every FloKit job: a Celery prefork worker may not start the step processes of
# the multiprocess default ("daemonic processes are not allowed to have children", docs/deploy.md).
reports_job = dg.define_asset_job(
    "reports_job",
    selection=REPORTS_SELECTION,
    description="Refresh the reports over the days whose inputs changed.",
    executor_def=dg.in_process_executor,
)
published_reports_freshness_job = dg.define_asset_job(
    "published_reports_freshness_job",
    selection=dg.AssetSelection.checks(published_reports_fresh),
    description="Evaluate the freshness check of the published reports (requested by its sensor).",
    executor_def=dg.in_process_executor,
)


# Run tag limited to one concurrent run (tag_concurrency_limits in both instance configs): the
# block runs of one refresh run in the order requested, the whole-table assets last.
REPORTS_WRITER_TAG = "flokit/reports_writer"
TABLE_KEYS = [asset.key for asset in TABLE_ASSETS]


# Daily datasets whose day D reads inputs of later days (the action signals: cohort day D reads
# its users' events of D..D+30), with how far ahead. A new day makes the 30 before it stale for
# them: in a block of their own, since widening the six-hourly one-day block to 31 days would
# cost every daily asset ~10 ms of event log per day for nothing (about 3 s a refresh).
READS_AHEAD = {
    dataset: max(after for _, _, after in sources)
    for dataset, sources in report_lake.DERIVED_FROM.items()
    if any(after for _, _, after in sources)
}


def _runs(stale: Mapping[str, list[date]]) -> list[tuple[list[date], list[dg.AssetKey], bool]]:
    """(days, daily assets, whether it also rebuilds the tables) per run, in run order.

    The other daily assets' blocks first, the last of them with the tables (so that its blocking
    checks still stop the publish in the same run); then the blocks of the datasets that read
    ahead, whose inputs at later days are all rewritten by then. A block of theirs that lies
    within another block's range rides along in that run when no later block rewrites a day it
    reads (the first refresh is one run)."""
    behind = {ds: days for ds, days in stale.items() if ds not in READS_AHEAD}
    blocks = day_blocks(set().union(*behind.values())) if behind else []
    # Every daily asset is named after the dataset it writes.
    runs = [
        (
            block,
            [dg.AssetKey(ds) for ds, days in behind.items() if any(block[0] <= d <= block[-1] for d in days)],
            False,
        )
        for block in blocks
    ]
    if runs:
        runs[-1] = (runs[-1][0], runs[-1][1], True)
    after: list[tuple[list[date], list[dg.AssetKey], bool]] = []
    for dataset, ahead in READS_AHEAD.items():
        for own in day_blocks(stale.get(dataset, ())):
            for i, (block, keys, _tables) in enumerate(runs):
                later = runs[i + 1][0][0] if i + 1 < len(runs) else date.max
                if block[0] <= own[0] and own[-1] <= block[-1] and block[-1] + timedelta(days=ahead) < later:
                    keys.append(dg.AssetKey(dataset))
                    break
            else:
                after.append((own, [dg.AssetKey(dataset)], False))
    return runs + after


def refresh_run_requests(lake: Lake) -> list[dg.RunRequest] | dg.SkipReason:
    """One stale-days-only range run per block of stale days, oldest first, of the daily assets
    with stale days in the block (each step costs Dagster events, ~10 ms each on SQLite, even
    when it has nothing to do); the last also rebuilds the whole-table assets and publishes.
    Then the runs of the datasets that read ahead (`READS_AHEAD`), unless they ride along."""
    stale = report_lake.stale_by_dataset(lake)
    if not stale:
        return dg.SkipReason("no canonical_events or spend_raw partition changed since the last refresh")
    return [
        dg.RunRequest(
            tags={**range_tags(days), STALE_DAYS_ONLY_TAG: "true", REPORTS_WRITER_TAG: "1"},
            asset_selection=daily + TABLE_KEYS if tables else daily,
        )
        for days, daily, tables in _runs(stale)
    ]


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
    on_run: Callable[[Any], None] = lambda _result: None,
    execute: Execute | None = None,
) -> Any:
    """Bring the reports up to date now, in this process (`flokit refresh`, tests, benchmarks):
    the runs the schedule would request, one after another, then again for the days a changed
    cohort marked stale outside them (at most MAX_ROUNDS times). Returns the last run that
    published (the action signals' own runs may follow it), else the last run, or the first that
    failed; None when no input day changed. Every run is in the instance's history, and given to
    `on_run` as it ends. With `execute` (`orchestration.submit`), each run is its `RunResult`
    instead of an `ExecuteInProcessResult` (the refresh's runs through the instance's queue)."""
    last: Any = None
    published: Any = None
    job = definitions.resolve_job_def(reports_job.name)
    for _ in range(MAX_ROUNDS):
        requests = refresh_run_requests(lake)
        if isinstance(requests, dg.SkipReason):
            break
        for request in requests:
            run_tags = {**request.tags, **(tags or {})}
            if execute is not None:
                last = execute(
                    reports_job.name, tags=run_tags, run_config=run_config, asset_selection=request.asset_selection
                )
            else:
                last = job.execute_in_process(
                    instance=instance,
                    tags=run_tags,
                    run_config=run_config,
                    asset_selection=request.asset_selection,
                    raise_on_error=False,
                )
            on_run(last)
            if not last.success:
                return last
            if set(TABLE_KEYS) <= set(request.asset_selection or ()):
                published = last
    return published or last


@dg.op(description="Announce the published payback changes no report.payback_updated event announced yet.")
def announce_payback_updates(data_dir: DataDirResource, database: DatabaseResource) -> dg.Output[None]:
    """The catch-up of `published_reports`'s own announcement, for a run that failed after its
    swap: the same comparison, on the store live now."""
    published = serving.payback_digests(current_reports(data_dir.paths))
    updates = payback_updates.notify_payback_updates(database.database(), published)
    return dg.Output(None, metadata={"payback_updated_events": len(updates)})


@dg.job(
    description="Announce published payback changes left unannounced (requested by payback_updated_sensor).",
    executor_def=dg.in_process_executor,  # one small op: no subprocess
)
def payback_updated_job() -> None:
    announce_payback_updates()
