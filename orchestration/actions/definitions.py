"""The actions domain: the engine job and its sensor."""

from __future__ import annotations

import dagster as dg

from orchestration.actions.jobs import actions_engine_job
from orchestration.actions.sensors import actions_engine_sensor

defs = dg.Definitions(jobs=[actions_engine_job], sensors=[actions_engine_sensor])
