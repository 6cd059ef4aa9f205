"""`actions_engine_sensor`: one engine run per reports run that materialized `action_signals`.

Why a sensor on the signals rather than a step of the reports job: the reports run in blocks of
stale days (several runs per refresh) and a signals-only run may follow the publish; the engine
should read the signals once they are all written, and once per run that wrote them. The run key
is the materializing run's id, so a sensor tick that sees the same run again starts nothing.
"""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import actions_engine_job


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
