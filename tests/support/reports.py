"""Shared by the report tests: a generated history in a temp lake, and a real refresh run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from orchestration.definitions import build_definitions
from orchestration.reports.jobs import refresh_reports
from transforms.demo import DemoConfig, DemoData, generate
from warehouse.lake import LocalLake
from warehouse.reports import demo, report_lake
from warehouse.settings import Settings

START = date(2026, 6, 1)


def seed_lake(data_dir: Path, workspace_id: str, *, users: int = 1500, days: int = 70, seed: int = 5) -> DemoData:
    """Canonical event partitions (as ingest writes them) and spend_raw for a workspace."""
    data = generate(DemoConfig(workspace_id=workspace_id, users=users, days=days, seed=seed, start=START))
    lake = LocalLake(data_dir / "lake")
    demo.write_event_partitions(lake, data.events)
    report_lake.write_spend_raw(lake, data.spend)
    return data


def refresh(data_dir: Path, database_url: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult | None:
    """`database_url`: an operational database holding the lake's workspaces (the report assets
    read their reporting currencies; the publish records what `report.payback_updated` announced),
    e.g. `tests.support.money.reports_database`."""
    definitions = build_definitions(Settings(data_dir=data_dir, database_url=database_url))
    return refresh_reports(definitions, instance, LocalLake(data_dir / "lake"))
