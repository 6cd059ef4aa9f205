"""The ad-accounts domain: the registry sync job and its schedule."""

from __future__ import annotations

import dagster as dg

from orchestration.adaccounts.jobs import ad_accounts_schedule, ad_accounts_sync_job

defs = dg.Definitions(jobs=[ad_accounts_sync_job], schedules=[ad_accounts_schedule])
