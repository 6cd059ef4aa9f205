"""How `flokit refresh` runs a job: in its own process (embedded default), or through the instance.

`in_process` is what the refresh always did: `execute_in_process` on the instance. With
FLOKIT_RUN_LAUNCHER=celery nothing may run in the command's own process (docs/deploy.md):
`through_queue` creates each run from the code location (workspace.yaml, as `dagster job launch`
does), submits it to the instance's run coordinator (the queue and its tag limits, then the daemon
launches it on a Celery worker) and waits for it to end.

Dagster has no public API for "create a run of this job's asset subset from the workspace and
submit it" outside a sensor; the few private names used are those of `dagster job launch`
(`dagster/_cli/job.py`), imported here only.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import dagster as dg

# The output metadata entry in which an op repeats its (JSON) output for a submitter on another
# host: run outputs stay in the IO manager of the host that ran them.
OUTPUT_VALUE = "flokit/output"
# Dagster's tags on a failed run (dagster/_core/storage/tags.py, WILL_RETRY_TAG and
# AUTO_RETRY_RUN_ID_TAG): whether the daemon will retry it, and the retry's id once launched.
WILL_RETRY_TAG = "dagster/will_retry"
AUTO_RETRY_RUN_ID_TAG = "dagster/auto_retry_run_id"
# How long a failed run may wait for the daemon to launch its retry (its loop runs every few
# seconds; a queued retry waits for a free slot like any run).
RETRY_LAUNCH_S = 300
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
POLL_S = 0.5


@dataclass(frozen=True)
class RunResult:
    """What the refresh reads of a run, wherever it ran."""

    run_id: str
    success: bool
    tags: Mapping[str, str]
    materialized: list[str]
    # A node's output (the actions engine's summary): in process, the node's output; for a run
    # on another host, whose outputs stay in that host's IO manager, what the node repeated in
    # its output metadata (OUTPUT_VALUE); None when there is none.
    output: Callable[[str], Any] | None = None


class Execute(Protocol):
    def __call__(
        self,
        job_name: str,
        *,
        tags: Mapping[str, str],
        run_config: Mapping[str, Any] | None = None,
        asset_selection: Sequence[dg.AssetKey] | None = None,
    ) -> RunResult: ...


def in_process(defs: dg.Definitions, instance: dg.DagsterInstance) -> Execute:
    def execute(
        job_name: str,
        *,
        tags: Mapping[str, str],
        run_config: Mapping[str, Any] | None = None,
        asset_selection: Sequence[dg.AssetKey] | None = None,
    ) -> RunResult:
        job = defs.resolve_job_def(job_name)
        result = job.execute_in_process(
            instance=instance,
            tags=tags,
            run_config=run_config,
            asset_selection=asset_selection,
            raise_on_error=False,
        )
        materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events() if e.asset_key}
        return RunResult(
            result.run_id, result.success, result.dagster_run.tags, sorted(materialized), result.output_for_node
        )

    return execute


@contextmanager
def through_queue(instance: dg.DagsterInstance, workspace: Path) -> Iterator[Execute]:
    """Submit runs to the instance from the workspace's one code location; each call waits for its run."""
    from dagster._core.definitions.selector import JobSubsetSelector  # noqa: TID251  (see the module doc)
    from dagster._core.workspace.context import WorkspaceProcessContext  # noqa: TID251
    from dagster._core.workspace.load_target import WorkspaceFileTarget  # noqa: TID251

    with _stdout_to_stderr():  # the code server it starts inherits stdout: keep `--json` output clean
        process = WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(workspace)]))
    with process:
        context = process.create_request_context()
        (location_name,) = context.code_location_names
        if context.has_code_location_error(location_name):
            raise RuntimeError(f"code location {location_name}: {context.get_code_location_error(location_name)}")
        location = context.get_code_location(location_name)
        (repository,) = location.get_repositories().values()

        def execute(
            job_name: str,
            *,
            tags: Mapping[str, str],
            run_config: Mapping[str, Any] | None = None,
            asset_selection: Sequence[dg.AssetKey] | None = None,
        ) -> RunResult:
            selector = JobSubsetSelector(
                location_name=location_name,
                repository_name=repository.name,
                job_name=job_name,
                op_selection=None,
                asset_selection=set(asset_selection) if asset_selection else None,
            )
            remote_job = location.get_job(selector)
            config = dict(run_config or {})
            plan = location.get_execution_plan(
                remote_job, config, step_keys_to_execute=None, known_state=None, instance=instance
            ).execution_plan_snapshot
            run = instance.create_run(
                job_name=job_name,
                run_id=None,
                run_config=config,
                resolved_op_selection=remote_job.resolved_op_selection,
                step_keys_to_execute=plan.step_keys_to_execute,
                op_selection=None,
                status=None,
                root_run_id=None,
                parent_run_id=None,
                tags={**remote_job.tags, **tags},
                job_snapshot=remote_job.job_snapshot,
                execution_plan_snapshot=plan,
                parent_job_snapshot=remote_job.parent_job_snapshot,
                remote_job_origin=remote_job.get_remote_origin(),
                job_code_origin=remote_job.get_python_origin(),
                asset_selection=frozenset(asset_selection) if asset_selection else None,
                asset_check_selection=None,
                asset_graph=repository.asset_graph,
            )
            instance.submit_run(run.run_id, context)
            return wait(instance, run.run_id)

        yield execute


def _finished(instance: dg.DagsterInstance, run_id: str) -> dg.DagsterRun:
    while True:
        run = instance.get_run_by_id(run_id)
        assert run is not None, f"run {run_id} vanished from the instance"
        if run.status in FINISHED:
            return run
        time.sleep(POLL_S)


def _retry_of(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str | None:
    """The id of the automatic retry of a failed run, once the daemon launched it; None when none
    will come. Dagster tags a failed run `dagster/will_retry` as it records the failure (a moment
    after the status changes) and the parent `dagster/auto_retry_run_id` when it launches the retry."""
    if run.status != dg.DagsterRunStatus.FAILURE or not instance.run_retries_enabled:
        return None
    deadline = time.monotonic() + RETRY_LAUNCH_S
    while time.monotonic() < deadline:
        tags = run.tags
        if tags.get(AUTO_RETRY_RUN_ID_TAG):
            return tags[AUTO_RETRY_RUN_ID_TAG]
        if tags.get(WILL_RETRY_TAG) == "false":
            return None
        time.sleep(POLL_S)
        again = instance.get_run_by_id(run.run_id)
        assert again is not None
        run = again
    return None  # the daemon never launched it: reported as the failure it is


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 is 2 meanwhile, for this process and what it starts."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def wait(instance: dg.DagsterInstance, run_id: str) -> RunResult:
    """Until the run ends (run monitoring ends a run whose worker died or that never started), and
    through Dagster's automatic retry of it: a run failed because its worker host died is run
    again on another worker (`run_retries`, docs/deploy.md), and what the caller waits for is the
    work, so the result is the retry's. A run that will not be retried (a step failed) ends here."""
    while True:
        run = _finished(instance, run_id)
        retry = _retry_of(instance, run)
        if retry is None:
            break
        run_id = retry
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    materialized = {
        r.event_log_entry.dagster_event.asset_key.to_user_string()
        for r in records
        if r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.asset_key
    }
    outputs: dict[str, Any] = {}
    for r in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_OUTPUT).records:
        event = r.event_log_entry.dagster_event
        if event is None or event.step_key is None:
            continue
        value = event.step_output_data.metadata.get(OUTPUT_VALUE)
        if isinstance(value, dg.JsonMetadataValue):
            outputs[event.step_key] = value.data
    return RunResult(
        run_id,
        run.status == dg.DagsterRunStatus.SUCCESS,
        run.tags,
        sorted(materialized),
        outputs.__getitem__ if outputs else None,
    )
