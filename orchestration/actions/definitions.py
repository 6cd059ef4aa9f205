"""The actions domain: the engine's, the executor's and the monitor's jobs and sensors (the
executor's own sensor is a queue's, bound at the composition root with the deployment's interval)."""

from __future__ import annotations

import dagster as dg

from orchestration.actions.engine_jobs import actions_engine_job, actions_engine_sensor
from orchestration.actions.jobs import execute_action_job
from orchestration.actions.monitor import monitor_actions_job, monitor_actions_sensor
from orchestration.actions.sensors import execute_action_failure_sensor

defs = dg.Definitions(
    jobs=[actions_engine_job, execute_action_job, monitor_actions_job],
    sensors=[actions_engine_sensor, execute_action_failure_sensor, monitor_actions_sensor],
)
