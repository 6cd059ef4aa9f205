"""The one composition root: every domain's `defs` merged, deployment values bound once.

Each domain is `orchestration/<domain>/definitions.py` exposing a static `defs` (assets, checks,
jobs, schedules, sensors); nothing in a domain reads the environment. What depends on the
deployment is bound here, from one settings load: the resources, and the queue sensors whose
minimum interval is FLOKIT_SENSOR_INTERVAL_S. `workspace.yaml` loads `defs`; `dagster
definitions validate` checks it in the tests.
"""

from __future__ import annotations

import os

import dagster as dg

from orchestration.actions.definitions import defs as actions_defs
from orchestration.actions.sensors import build_execute_action_sensor
from orchestration.adaccounts.definitions import defs as adaccounts_defs
from orchestration.adaccounts.sensors import SYNC_REQUESTS
from orchestration.catalog.definitions import defs as catalog_defs
from orchestration.events.definitions import defs as events_defs
from orchestration.events.sensors import build_canonical_events_sensor
from orchestration.reports.definitions import defs as reports_defs
from orchestration.resources import DatabaseResource, DataDirResource, InstanceKeyResource
from orchestration.spend.definitions import defs as spend_defs
from orchestration.syncs.definitions import defs as syncs_defs
from orchestration.syncs.sensors import SYNCS
from orchestration.webhooks.definitions import defs as webhooks_defs
from orchestration.webhooks.resources import WebhookHttpClient, WebhookQueue
from orchestration.webhooks.sensors import build_webhook_sensor
from orchestration.workspaces.definitions import defs as workspaces_defs
from warehouse.settings import Settings

DATABASE_URL_ENV = "FLOKIT_DATABASE_URL"


def build_definitions(settings: Settings | None = None) -> dg.Definitions:
    """Processes pass nothing: the settings are loaded once, from FLOKIT_* (`flokit up` and
    `flokit refresh` set them for the processes they start). Tests pass their own."""
    database_url: str = settings.database_url if settings else ""
    if settings is None:
        settings = Settings.from_env()
        # A database URL from the environment stays an EnvVar: the Dagster UI shows resource
        # values, and a PostgreSQL URL carries a password. (Settings validated it above.)
        env_url = os.environ.get(DATABASE_URL_ENV, "").strip()
        database_url = dg.EnvVar(DATABASE_URL_ENV) if env_url else settings.database_url
    return dg.Definitions.merge(
        actions_defs,
        adaccounts_defs,
        catalog_defs,
        events_defs,
        reports_defs,
        spend_defs,
        syncs_defs,
        webhooks_defs,
        workspaces_defs,
        dg.Definitions(
            # Every job without its own executor (the implicit asset job `flokit refresh` selects
            # from, the monitor's, the dedup pruning) runs its steps in the run's process: a
            # Celery prefork worker may not start the step processes of Dagster's multiprocess
            # default ("daemonic processes are not allowed to have children", docs/deploy.md).
            executor=dg.in_process_executor,
            sensors=[
                build_canonical_events_sensor(settings.sensor_interval_s),
                build_webhook_sensor(settings.sensor_interval_s),
                SYNCS.request_sensor(settings.sensor_interval_s),
                SYNC_REQUESTS.request_sensor(settings.sensor_interval_s),
                build_execute_action_sensor(settings.sensor_interval_s),
            ],
            resources={
                "database": DatabaseResource(url=database_url),
                "data_dir": DataDirResource(root=str(settings.data_dir), lake_url=settings.lake_url),
                "instance_key": InstanceKeyResource(data_dir=str(settings.data_dir)),
                "webhook_queue": WebhookQueue(
                    backoff_scale=settings.webhook_backoff_scale, lifetime_s=settings.webhook_drain_lifetime_s
                ),
                "webhook_http": WebhookHttpClient(allow_private=settings.webhooks_allow_private),
            },
        ),
    )


defs = build_definitions()
