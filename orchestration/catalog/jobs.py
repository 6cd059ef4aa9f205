"""The catalog domain's job: rebuild warehouse.duckdb."""

from __future__ import annotations

import dagster as dg

from orchestration.catalog.assets import analyst_catalog

analyst_catalog_job = dg.define_asset_job(
    "analyst_catalog_job",
    selection=[analyst_catalog],
    description="Rebuild the analyst catalog.",
    executor_def=dg.in_process_executor,  # a Celery prefork worker starts no step processes (docs/deploy.md)
)
