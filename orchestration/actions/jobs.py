"""`execute_action_job`: one approved action applied, or one rolled-back action reverted.

Requested by the sensor `execute_action_sensor` (one run per approval and per rollback). The body is
`orchestration.actions.executor.execute`; a refusal or a give-up is the action's outcome
(rejected by `flokit executor`, with the reason), not a failed run; a revert with a leg the
platform did not take fails the run, so that `execute_action_failure_sensor` asks for it again.
A run that crashes leaves the ledger saying where it stopped; running the job again for the
action continues from there.
"""

# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

from typing import Literal

import dagster as dg

from orchestration.actions.executor import execute
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource

ACTION_TAG = "flokit/action_id"
KIND_TAG = "flokit/execution_kind"


class ExecuteActionConfig(dg.Config):
    action_id: str
    kind: Literal["apply", "revert"] = "apply"


def execute_run_config(action_id: str, kind: str) -> dict[str, object]:
    return {"ops": {"execute_action_op": {"config": {"action_id": action_id, "kind": kind}}}}


@dg.op(description="Applies an approved action on its platform (or reverts a rolled-back one), leg by leg.")
def execute_action_op(
    context: dg.OpExecutionContext,
    config: ExecuteActionConfig,
    database: DatabaseResource,
    data_dir: DataDirResource,
    instance_key: InstanceKeyResource,
) -> dg.Output[None]:
    outcome = execute(
        database.database(),
        data_dir.paths.lake(),
        instance_key.key(),
        action_id=config.action_id,
        kind=config.kind,
        log=context.log.info,
    )
    if outcome.result == "incomplete":  # a revert leg failed: a failed run is what gets retried
        raise dg.Failure(description=f"{outcome.action_id}: revert incomplete: {outcome.message}")
    return dg.Output(
        None,
        metadata={
            "action_id": outcome.action_id,
            "kind": outcome.kind,
            "result": outcome.result,
            "message": outcome.message,
            "platform_writes": outcome.writes,
        },
    )


@dg.job(
    name="execute_action_job",
    description="Applies or reverts one growth action (requested by execute_action_sensor).",
    executor_def=dg.in_process_executor,
    tags={"flokit/domain": "actions"},
)
def execute_action_job() -> None:
    execute_action_op()
