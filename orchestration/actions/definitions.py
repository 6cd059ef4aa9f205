"""The actions domain: the executor's job and sensor."""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import execute_action_job
from orchestration.actions.sensors import action_executor

defs = dg.Definitions(jobs=[execute_action_job], sensors=[action_executor])
