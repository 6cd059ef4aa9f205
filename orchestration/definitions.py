"""The one composition root: per-domain definitions merged, resources bound once.

`workspace.yaml` loads this module; `dagster definitions validate` checks it in the tests.
"""

from __future__ import annotations

import dagster as dg

from orchestration.reports.definitions import defs as report_defs
from orchestration.resources import DatabaseResource, LakeResource
from orchestration.webhooks.definitions import build_webhook_defs
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.workspaces.assets import defs as workspace_defs
from warehouse.settings import Settings


def build_definitions(database_url: str | None = None, data_dir: str | None = None) -> dg.Definitions:
    """Tests pass explicit locations; processes leave them None to follow FLOKIT_* at run time."""
    # Sensor intervals are part of the definitions, so FLOKIT_SENSOR_INTERVAL_S is read here.
    sensor_interval_s = Settings.from_env().sensor_interval_s
    return dg.Definitions.merge(
        workspace_defs,
        build_webhook_defs(sensor_interval_s),
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
