"""The sensor `action_executor`: one `execute_action` run per approval and per rollback.

Each approval (the `approve` transition of an action still `approved`) and each rollback of an
action with verified platform changes is requested once, with `run_key` =
`act-exec-<action>-<transition id>` (`act-revert-…` for a rollback): Dagster launches one run
per run key, and the cursor (the highest transition id requested) keeps a later tick from asking
again; Dagster stores the cursor only once the tick's runs are launched, so none is lost. A
second approval of the same action (approved, refused, proposed again) is a new transition id,
hence a new run. Like the webhook drain sensor, the tick reads one indexed query and nothing else.
"""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import ACTION_TAG, KIND_TAG, execute_action_job, execute_run_config
from orchestration.resources import DatabaseResource
from warehouse.actions.executions import work_after

INTERVAL_S = 30


def run_key(action_id: str, kind: str, transition_id: int) -> str:
    return f"act-{'exec' if kind == 'apply' else 'revert'}-{action_id}-{transition_id}"


@dg.sensor(
    name="action_executor",
    job=execute_action_job,
    minimum_interval_seconds=INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Requests one execute_action run per approved action and per rollback to revert.",
)
def action_executor(context: dg.SensorEvaluationContext, database: DatabaseResource) -> dg.SensorResult | dg.SkipReason:
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
