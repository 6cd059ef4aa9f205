"""`actions_engine_job`: the engine over every workspace (or one), after the reports.

Requested by `actions_engine_sensor` when `action_signals` is materialized, and run by `flokit
refresh` after the reports. A workspace whose step fails is logged and the others still run.

`actions_engine_sensor`: one engine run per reports run that materialized `action_signals`.

Why a sensor on the signals rather than a step of the reports job: the reports run in blocks of
stale days (several runs per refresh) and a signals-only run may follow the publish; the engine
should read the signals once they are all written, and once per run that wrote them. The run key
is the materializing run's id, so a sensor tick that sees the same run again starts nothing.
"""


# No `from __future__ import annotations`: Dagster reads the op's config annotation at runtime.

import dagster as dg

from orchestration.actions.engine import run_engine
from orchestration.resources import DatabaseResource, DataDirResource
from orchestration.submit import OUTPUT_VALUE


class EngineConfig(dg.Config):
    workspace_id: str | None = None


@dg.op(description="Proposes, re-evaluates and expires growth actions from the action signals and the registry.")
def run_actions_engine(
    context: dg.OpExecutionContext, config: EngineConfig, database: DatabaseResource, data_dir: DataDirResource
) -> list[str]:
    """Each workspace's summary is also the op's output, so `flokit refresh` can print what the
    engine did (it materializes no asset to show); for a run on a worker host, whose outputs
    stay there, the same list rides in the output's metadata (`OUTPUT_VALUE`)."""
    results = run_engine(
        database.database(), data_dir.paths.lake(), workspace_id=config.workspace_id, log=context.log.info
    )
    summaries = [r.summary() for r in results]
    context.add_output_metadata({OUTPUT_VALUE: dg.MetadataValue.json(summaries)})
    return summaries


@dg.job(
    description="The growth-actions engine: proposals from the action signals (after every reports publish).",
    executor_def=dg.in_process_executor,
    tags={"flokit/domain": "actions"},
)
def actions_engine_job() -> None:
    run_actions_engine()


@dg.asset_sensor(
    asset_key=dg.AssetKey("action_signals"),
    job=actions_engine_job,
    name="actions_engine_sensor",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs the growth-actions engine after action_signals is materialized.",
)
def actions_engine_sensor(context: dg.SensorEvaluationContext, asset_event: dg.EventLogEntry) -> dg.RunRequest:
    return dg.RunRequest(run_key=f"actions-engine-{asset_event.run_id}")
