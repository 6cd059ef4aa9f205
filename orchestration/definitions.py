"""The one composition root: per-domain definitions merged, resources bound once.

`workspace.yaml` loads this module; `dagster definitions validate` checks it in the tests.
"""

from __future__ import annotations

import dagster as dg

from orchestration.catalog import defs as catalog_defs
from orchestration.events.sensors import build_defs as build_events_defs
from orchestration.reports.definitions import defs as report_defs
from orchestration.resources import DatabaseResource, LakeResource
from orchestration.webhooks.definitions import build_webhook_defs
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.workspaces.assets import defs as workspace_defs
from warehouse.settings import Settings


def build_definitions(
    database_url: str | None = None, data_dir: str | None = None, sensor_interval_s: int | None = None
) -> dg.Definitions:
    """Tests pass explicit locations; processes leave them None to follow FLOKIT_* at run time
    (the sensor interval is fixed when the definitions load: Dagster needs it up front)."""
    interval = sensor_interval_s if sensor_interval_s is not None else Settings.from_env().sensor_interval_s
    return dg.Definitions.merge(
        workspace_defs,
        build_events_defs(interval),
        catalog_defs,
        build_webhook_defs(interval),
        report_defs,
        dg.Definitions(
            resources={
                "database": DatabaseResource(url=database_url),
                "lake": LakeResource(data_dir=data_dir),
                "webhook_queue": WebhookQueue(),
                "webhook_http": WebhookHttpClient(),
            }
        ),
    )


defs = build_definitions()
