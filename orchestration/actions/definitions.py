"""The actions domain: the executor's job and sensor, the monitor's job and sensor."""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import execute_action_job
from orchestration.actions.monitor import action_monitor_sensor, monitor_actions_job
from orchestration.actions.sensors import action_executor, action_executor_retry

defs = dg.Definitions(
    jobs=[execute_action_job, monitor_actions_job],
    sensors=[action_executor, action_executor_retry, action_monitor_sensor],
)
