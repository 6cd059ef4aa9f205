"""Webhook delivery definitions: the drain job and its sensor."""

from __future__ import annotations

import dagster as dg

from orchestration.webhooks.jobs import deliver_webhooks_job
from orchestration.webhooks.sensors import build_webhook_sensor


def build_webhook_defs(sensor_interval_s: int) -> dg.Definitions:
    return dg.Definitions(jobs=[deliver_webhooks_job], sensors=[build_webhook_sensor(sensor_interval_s)])
