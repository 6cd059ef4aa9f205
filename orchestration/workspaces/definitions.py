"""The workspaces domain: the tenants dimension in the lake."""

import dagster as dg

from orchestration.workspaces.assets import workspaces

defs = dg.Definitions(assets=[workspaces])
