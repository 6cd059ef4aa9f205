"""Bring the warehouse up to date now (`flokit refresh`): landed events, reports, catalog.

Runs go through the Dagster instance it is given (the one at DAGSTER_HOME), so they appear in
the UI's run history like the daemon's, and each is the run the daemon itself would request:

Before any run, it fails the runs a killed process left unfinished on this host and the syncs
they left open (`orchestration.liveness`, `SYNCS.fail_abandoned`), and queues each such sync again:
a refresh killed with SIGKILL would otherwise hold two of the dev instance's run slots and its
integration `syncing` for good. Its own runs carry its host and pid, for the next one to check.

0. the queued integration syncs, one `integration_sync_job` run each (a sync's provider failure
   is the sync's outcome, printed; it does not stop the refresh, since the other inputs are
   still worth refreshing);
0b. the ad accounts' entity registry, one `ad_accounts_sync_job` run over every live account
   (a platform's failure is that account's outcome, printed; the refresh goes on), so that the
   engine after the reports reads a registry as fresh as the data;
1. `canonical_events` over every UTC day with pending landed rows (one run per block of nearby
   days, as `canonical_events_sensor` requests them; only the changed days are rewritten);
2. the reports over every day whose inputs changed (the six-hourly schedule's runs);
3. the growth-actions engine (`actions_engine_job`), after the reports: proposals from the
   signals just written (the daemon runs it on the `action_signals` materialization instead);
4. `analyst_catalog`, since it reads what the others wrote;
5. the growth-action monitor (`orchestration.actions.monitor`), last: it reads the action signals
   the reports step wrote.

A step that has nothing to do starts no run. The refresh stops at the first failed run:
whatever is downstream of a failure would be stale.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import dagster as dg

from orchestration.actions.engine_jobs import actions_engine_job, run_actions_engine
from orchestration.actions.monitor import latest_run_key, monitor_actions_job, monitor_run_config
from orchestration.adaccounts.jobs import ad_accounts_sync_job
from orchestration.catalog.assets import analyst_catalog
from orchestration.events.assets import ASSET as EVENTS
from orchestration.events.sensors import events_run_requests, requestable_days
from orchestration.liveness import fail_dead_runs, process_tags
from orchestration.partitions import range_label
from orchestration.reports.jobs import refresh_reports
from orchestration.submit import Execute, RunResult, in_process
from orchestration.syncs.jobs import integration_sync_job, sync_run_config
from orchestration.syncs.sensors import SYNCS, sync_run_request
from warehouse.actions.repository import running_actions_for_operator
from warehouse.adaccounts.repository import list_accounts, live_accounts_for_operator
from warehouse.db import Database
from warehouse.errors import TransitionRefused
from warehouse.events.landing import pending_days
from warehouse.integrations.repository import get_sync, queued_syncs, request_sync_for_operator
from warehouse.lake import Lake

REFRESH_TAG = "flokit/refresh"
# Dagster's console logger prints every step event at DEBUG; the refresh prints its own progress
# and the full event log stays in the instance (Dagster UI).
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


@dataclass
class RunOutcome:
    name: str
    partition: str | None  # the day, or `first..last` for a range run
    run_id: str
    success: bool
    assets: list[str] = field(default_factory=list)


def refresh(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    database: Database,
    lake: Lake,
    progress: Callable[[str], None] = lambda _line: None,
    execute: Execute | None = None,
) -> list[RunOutcome]:
    """Run the steps; returns one outcome per run started. Each run is `execute`d: in this process
    by default, or submitted to the instance's queue and waited for (`orchestration.submit`)."""
    outcomes: list[RunOutcome] = []
    asset_job = defs.resolve_implicit_global_asset_job_def().name
    recover(instance, database, progress)
    # A run in this process carries its host and pid (a killed refresh's runs are failed by the
    # next, `orchestration.liveness`); a run on a worker does not die with this process.
    tags = {REFRESH_TAG: "true", **(process_tags() if execute is None else {})}
    execute = execute or in_process(defs, instance)

    def record(name: str, result: RunResult, what: str | None = None) -> bool:
        outcome = RunOutcome(name, range_label(result.tags), result.run_id, result.success, result.materialized)
        outcomes.append(outcome)
        where = f" [{outcome.partition}]" if outcome.partition else ""
        verdict = "succeeded" if outcome.success else "FAILED"
        progress(f"  run {outcome.run_id} {verdict}: {what or ', '.join(outcome.assets) or 'nothing new'}{where}")
        return result.success

    with database.read() as conn:
        queued = queued_syncs(conn)
    progress(f"{len(queued)} queued integration sync(s)")
    for sync, integration_type in queued:
        progress(f"syncing {integration_type} integration {sync.integration_id} ({sync.id}) ...")
        request = sync_run_request(sync, integration_type)
        result = execute(
            integration_sync_job.name, run_config={**sync_run_config(sync.id), **QUIET}, tags={**request.tags, **tags}
        )
        with database.read() as conn:
            ended = get_sync(conn, sync_id=sync.id)
        outcome = RunOutcome(f"sync {sync.id}", None, result.run_id, result.success)
        outcomes.append(outcome)
        detail = (
            f"{ended.records_written} record(s)"
            if ended.status == "succeeded"
            else f"{ended.error_code}: {ended.error_message}"
        )
        progress(f"  run {result.run_id} {'succeeded' if result.success else 'FAILED'}: sync {ended.status}, {detail}")

    with database.read() as conn:
        accounts = live_accounts_for_operator(conn)
    progress(f"{len(accounts)} ad account(s) to sync")
    if accounts:
        progress("syncing the ad accounts' registry ...")
        result = execute(ad_accounts_sync_job.name, tags=tags, run_config=QUIET)
        outcomes.append(RunOutcome("ad_accounts_sync", None, result.run_id, result.success))
        with database.read() as conn:
            after = {a.id: a for w in {a.workspace_id for a in accounts} for a in list_accounts(conn, workspace_id=w)}
        states = ", ".join(
            f"{a.id} {after[a.id].status}" + (f" ({after[a.id].last_error})" if after[a.id].status == "error" else "")
            for a in accounts
        )
        progress(f"  run {result.run_id} {'succeeded' if result.success else 'FAILED'}: {states}")

    with database.read() as conn:
        days = requestable_days(pending_days(conn), datetime.now(UTC).date())
    progress(f"{len(days)} day(s) with new landed events")
    for request in events_run_requests(days):
        progress(f"materializing canonical_events [{range_label(request.tags)}] ...")
        result = execute(asset_job, asset_selection=[EVENTS], tags={**request.tags, **tags}, run_config=QUIET)
        if not record("canonical_events", result):
            return outcomes

    progress("refreshing the reports (days whose inputs changed) ...")
    runs: list[RunResult] = []  # one per block of stale days, oldest first
    reports = refresh_reports(defs, instance, lake, tags=tags, run_config=QUIET, on_run=runs.append, execute=execute)
    if reports is None:
        progress("  reports are up to date")
    elif not all([record("reports", run) for run in runs]):
        return outcomes

    progress("running the growth-actions engine ...")
    engine = execute(actions_engine_job.name, tags=tags, run_config=QUIET)
    # A failure is printed and fails the refresh; the catalog does not need it. The engine
    # materializes nothing, so its line says what it did to each workspace's queue.
    summaries = engine.output(run_actions_engine.name) if engine.success and engine.output else None
    record("actions_engine", engine, ("; ".join(summaries) or "no workspace") if summaries is not None else None)

    progress("rebuilding the analyst catalog ...")
    catalog = execute(asset_job, asset_selection=[analyst_catalog.key], tags=tags, run_config=QUIET)
    if not record("analyst_catalog", catalog):
        return outcomes

    # Last: the growth-action monitor over the lake as this refresh left it (the engine's step,
    # when there is one, comes before it). One run keyed like the sensor's, so the daemon's
    # sensor seeing the same materialization records nothing twice.
    with database.read() as conn:
        running = running_actions_for_operator(conn)
    progress(f"{len(running)} running growth action(s) to check")
    if not running:
        return outcomes
    run_key = latest_run_key(instance)
    monitor = execute(monitor_actions_job.name, run_config={**monitor_run_config(run_key), **QUIET}, tags=tags)
    record("monitor_actions", monitor)
    return outcomes


def recover(instance: dg.DagsterInstance, database: Database, progress: Callable[[str], None]) -> None:
    """Fail the runs of dead processes and the syncs they left open; queue those syncs again (with
    their trigger; a disconnected integration's stays failed)."""
    for dead in fail_dead_runs(instance):
        progress(f"run {dead.run_id} ({dead.job_name}) marked failed: {dead.reason}")
    for sync in SYNCS.fail_abandoned(instance, database):
        try:
            with database.write() as conn:
                again, _ = request_sync_for_operator(
                    conn,
                    integration_id=sync.integration_id,
                    trigger="scheduled" if sync.trigger == "scheduled" else "manual",
                )
        except TransitionRefused:
            progress(f"sync {sync.id} marked failed ({sync.error_message}); its integration is disconnected")
            continue
        progress(f"sync {sync.id} marked failed ({sync.error_message}); queued again as {again.id}")
