"""Resources for the operational database and the lake.

Both resolve unset fields from the FLOKIT_* environment at run time (not at import), so the
same definitions serve `flokit up`, `dagster dev`, tests (which pass explicit values) and
production.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from warehouse.db import Database, database_for
from warehouse.lake import Lake
from warehouse.settings import Settings


class DatabaseResource(dg.ConfigurableResource):
    """The operational database (SQLite or PostgreSQL)."""

    url: str | None = None

    def database(self) -> Database:
        return database_for(self.url or Settings.from_env().database_url)


class LakeResource(dg.ConfigurableResource):
    """The Parquet lake and the DuckDB analyst catalog under the data directory."""

    data_dir: str | None = None

    @property
    def settings_data_dir(self) -> Path:
        return Path(self.data_dir) if self.data_dir else Settings.from_env().data_dir

    def lake(self) -> Lake:
        return Lake(self.settings_data_dir / "lake")

    @property
    def catalog_path(self) -> Path:
        return self.settings_data_dir / "warehouse.duckdb"
