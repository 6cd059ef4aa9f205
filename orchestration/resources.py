"""The resources every domain shares: the operational database and the data directory.

Their fields are required and bound once, at the composition root (`orchestration/definitions.py`),
from one settings load; nothing here reads the environment.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from warehouse.db import Database, database_for
from warehouse.paths import DataPaths


class DatabaseResource(dg.ConfigurableResource):
    """The operational database (SQLite or PostgreSQL)."""

    url: str

    def database(self) -> Database:
        return database_for(self.url.strip())


class DataDirResource(dg.ConfigurableResource):
    """The data directory: the Parquet lake, the analyst catalog, the published reports (`DataPaths`)."""

    root: str

    @property
    def paths(self) -> DataPaths:
        return DataPaths(Path(self.root))
