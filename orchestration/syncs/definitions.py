"""The syncs domain: the sync job and the run-failure sensor.

`integration_sync_sensor` is not here: its interval is a deployment setting, so the
composition root builds it (`SYNCS.request_sensor`) with the resources.
"""

from __future__ import annotations

import dagster as dg

from orchestration.syncs.jobs import integration_sync_job
from orchestration.syncs.sensors import integration_sync_failure_sensor

defs = dg.Definitions(jobs=[integration_sync_job], sensors=[integration_sync_failure_sensor])
