"""The reports domain: payback and cohort reports, their checks, the six-hourly schedule."""

from __future__ import annotations

import dagster as dg

from orchestration.reports.assets import ASSETS
from orchestration.reports.checks import CHECKS
from orchestration.reports.jobs import (
    payback_updated_job,
    published_reports_freshness_job,
    reports_job,
    reports_schedule,
)
from orchestration.reports.sensors import (
    payback_updated_sensor,
    published_reports_freshness_sensor,
    reports_sensor,
)

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[reports_job, published_reports_freshness_job, payback_updated_job],
    schedules=[reports_schedule],
    sensors=[reports_sensor, published_reports_freshness_sensor, payback_updated_sensor],
)
