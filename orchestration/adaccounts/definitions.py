"""The ad-accounts domain: the registry sync job, its schedule, and the run-failure sensor of
the dashboard's "Sync now" requests.

`ad_accounts_sync_sensor` is not here: its interval is a deployment setting, so the
composition root builds it (`SYNC_REQUESTS.request_sensor`) with the resources.
"""

from __future__ import annotations

import dagster as dg

from orchestration.adaccounts.jobs import ad_accounts_sync_job, ad_accounts_sync_schedule
from orchestration.adaccounts.sensors import ad_accounts_sync_failure_sensor

defs = dg.Definitions(
    jobs=[ad_accounts_sync_job],
    schedules=[ad_accounts_sync_schedule],
    sensors=[ad_accounts_sync_failure_sensor],
)
