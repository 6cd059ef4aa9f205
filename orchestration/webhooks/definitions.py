"""The webhooks domain: the drain job.

`webhook_deliveries_sensor` is not here: its interval is a deployment setting, so the
composition root builds it (`build_webhook_sensor`) with the resources.
"""

from __future__ import annotations

import dagster as dg

from orchestration.webhooks.jobs import webhook_deliveries_job

defs = dg.Definitions(jobs=[webhook_deliveries_job])
