"""The sensor `execute_action_sensor`: one `execute_action_job` run per approval and per rollback.

Each approval (the `approve` transition of an action still `approved`) and each rollback of an
action with verified platform changes is requested once, with `run_key` =
`act-exec-<action>-<transition id>` (`act-revert-…` for a rollback): Dagster launches one run
per run key, and the cursor (the highest transition id requested) keeps a later tick from asking
again; Dagster stores the cursor only once the tick's runs are launched, so none is lost. A
second approval of the same action (approved, refused, proposed again) is a new transition id,
hence a new run. Like the webhook drain sensor, the tick reads one indexed query and nothing else.

A run that fails (the process died, the database went away mid-run) would otherwise leave its
approval waiting forever, since the cursor has moved past it: `execute_action_failure_sensor` requests
the same work again, up to MAX_ATTEMPTS runs, while the action still needs it. The executor
continues from its ledger, so a retry never writes a leg twice.
"""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import ACTION_TAG, KIND_TAG, execute_action_job, execute_run_config
from orchestration.resources import DatabaseResource
from warehouse.actions import repository
from warehouse.actions.executions import work_after, workspace_of
from warehouse.errors import NotFound

RETRY_INTERVAL_S = 30  # a failed run is asked for again within 30 s
MAX_ATTEMPTS = 3  # runs per approval or rollback, the first included
ATTEMPT_TAG = "flokit/attempt"
RUN_KEY_TAG = "dagster/run_key"
# The status in which an action still needs its run's work.
_NEEDS = {"apply": "approved", "revert": "rolled_back"}


def run_key(action_id: str, kind: str, transition_id: int) -> str:
    return f"act-{'exec' if kind == 'apply' else 'revert'}-{action_id}-{transition_id}"


def request_executions(
    context: dg.SensorEvaluationContext, database: DatabaseResource
) -> dg.SensorResult | dg.SkipReason:
    """One tick: a run request per approval and rollback after the cursor (the sensor's body)."""
    after = int(context.cursor) if context.cursor else 0
    with database.database().read() as conn:
        work = work_after(conn, after_transition_id=after)
    if not work:
        return dg.SkipReason("no approval or rollback to execute")
    requests = [
        dg.RunRequest(
            run_key=run_key(action_id, kind, transition_id),
            run_config=execute_run_config(action_id, kind),
            tags={ACTION_TAG: action_id, KIND_TAG: kind},
        )
        for action_id, kind, transition_id in work
    ]
    return dg.SensorResult(run_requests=requests, cursor=str(max(t for _, _, t in work)))


def build_execute_action_sensor(minimum_interval_seconds: int) -> dg.SensorDefinition:
    """Built at the composition root: the interval is the deployment's FLOKIT_SENSOR_INTERVAL_S, as
    for the other queues (an approval is a queue: an approved action starts within one interval)."""
    return dg.sensor(
        name="execute_action_sensor",
        job=execute_action_job,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Requests one execute_action_job run per approved action and per rollback to revert.",
    )(request_executions)


@dg.run_failure_sensor(
    name="execute_action_failure_sensor",
    monitored_jobs=[execute_action_job],
    request_job=execute_action_job,
    minimum_interval_seconds=RETRY_INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests a failed execute_action_job run again (up to 3 runs) while its action still needs it.",
)
def execute_action_failure_sensor(
    context: dg.RunFailureSensorContext, database: DatabaseResource
) -> dg.RunRequest | dg.SkipReason:
    failed = context.dagster_run
    action_id, kind = failed.tags.get(ACTION_TAG), failed.tags.get(KIND_TAG, "apply")
    attempt = int(failed.tags.get(ATTEMPT_TAG, "1"))
    if not action_id or kind not in _NEEDS:
        return dg.SkipReason(f"run {failed.run_id} names no action to execute")
    if attempt >= MAX_ATTEMPTS:
        return dg.SkipReason(
            f"{action_id}: {attempt} runs failed; re-execute the last one from the Dagster UI once the cause is fixed"
        )
    with database.database().read() as conn:
        try:
            workspace_id = workspace_of(conn, action_id=action_id)
            status = repository.get_action(conn, workspace_id=workspace_id, action_id=action_id).status
        except NotFound:
            return dg.SkipReason(f"{action_id} no longer exists")
    if status != _NEEDS[kind]:
        return dg.SkipReason(f"{action_id} is {status} now: nothing left to {kind}")
    base = failed.tags.get(RUN_KEY_TAG, f"act-{kind}-{action_id}").split(":attempt-")[0]
    return dg.RunRequest(
        run_key=f"{base}:attempt-{attempt + 1}",
        run_config=failed.run_config,
        tags={ACTION_TAG: action_id, KIND_TAG: kind, ATTEMPT_TAG: str(attempt + 1)},
    )
