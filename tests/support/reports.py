"""Shared by the report tests: a generated history in a temp lake, and a real refresh run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from orchestration.definitions import build_definitions
from orchestration.reports.jobs import refresh_reports
from transforms.demo import DemoConfig, DemoData, generate
from warehouse.paths import DataPaths
from warehouse.reports import demo, report_lake
from warehouse.settings import Settings

START = date(2026, 6, 1)


def seed_lake(
    data_dir: Path, workspace_id: str, *, users: int = 1500, days: int = 70, seed: int = 5, lake_url: str = ""
) -> DemoData:
    """Canonical event partitions (as ingest writes them) and spend_raw for a workspace, in the
    data directory's lake or the one `lake_url` names (FLOKIT_LAKE_URL)."""
    data = generate(DemoConfig(workspace_id=workspace_id, users=users, days=days, seed=seed, start=START))
    lake = DataPaths(data_dir, lake_url).lake()
    demo.write_event_partitions(lake, data.events)
    report_lake.write_spend_raw(lake, data.spend)
    return data


def refresh(
    data_dir: Path, database_url: str, instance: dg.DagsterInstance, *, lake_url: str = ""
) -> dg.ExecuteInProcessResult | None:
    """`database_url`: an operational database holding the lake's workspaces (the report assets
    read their reporting currencies; the publish records what `report.payback_updated` announced),
    e.g. `tests.support.money.reports_database`."""
    settings = Settings(data_dir=data_dir, database_url=database_url, lake_url=lake_url)
    return refresh_reports(build_definitions(settings), instance, settings.paths.lake())
