"""The reports domain's definitions, merged by `orchestration/definitions.py`."""

from __future__ import annotations

import dagster as dg

from orchestration.reports.assets import ASSETS
from orchestration.reports.checks import CHECKS
from orchestration.reports.jobs import reports_first_refresh, reports_job, reports_schedule

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[reports_job],
    schedules=[reports_schedule],
    sensors=[reports_first_refresh],
)
