"""The spend domain: the raw spend deliveries the reports are computed from."""

from __future__ import annotations

import dagster as dg

from orchestration.spend.assets import spend_raw

defs = dg.Definitions(assets=[spend_raw])
