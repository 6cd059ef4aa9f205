"""Partitions and start dates shared by every daily asset.

Daily partitions are the unit of incremental work and of parallelism: a late event re-runs its
own day, a six-hourly refresh touches only changed days. `end_offset=1` includes today, since
events of the current UTC day arrive all day long.
"""

from __future__ import annotations

import dagster as dg

# The earliest UTC day any FloKit data can belong to. Events that occurred before it are dropped
# at ingest (an attribution callback two years late is a vendor bug, not a conversion).
LAKE_START_DATE = "2024-01-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=LAKE_START_DATE, end_offset=1, timezone="UTC")
