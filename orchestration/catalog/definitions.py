"""The catalog domain: warehouse.duckdb for analysts."""

from __future__ import annotations

import dagster as dg

from orchestration.catalog.assets import analyst_catalog
from orchestration.catalog.jobs import analyst_catalog_job
from orchestration.catalog.sensors import analyst_catalog_sensor

defs = dg.Definitions(assets=[analyst_catalog], jobs=[analyst_catalog_job], sensors=[analyst_catalog_sensor])
