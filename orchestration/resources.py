"""The resources every domain shares: the operational database and the data directory.

Their fields are required and bound once, at the composition root (`orchestration/definitions.py`),
from one settings load; nothing here reads the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from warehouse.db import Database, database_for
from warehouse.paths import DataPaths
from warehouse.settings import instance_key_for


class DatabaseResource(dg.ConfigurableResource):
    """The operational database (SQLite or PostgreSQL)."""

    url: str

    def database(self) -> Database:
        return database_for(self.url.strip())


class DataDirResource(dg.ConfigurableResource):
    """The data directory: the Parquet lake, the analyst catalog, the published reports (`DataPaths`)."""

    root: str
    lake_url: str = ""  # FLOKIT_LAKE_URL ("" : `<root>/lake`)

    @property
    def paths(self) -> DataPaths:
        return DataPaths(Path(self.root), self.lake_url)


class InstanceKeyResource(dg.ConfigurableResource):
    """The instance key that unseals integration credentials, read when a run needs it.

    Its only field is the data directory: the key itself (FLOKIT_SECRET_KEY, else the data
    directory's `instance.key`) is never a resource value, which the Dagster UI would display."""

    data_dir: str

    def key(self) -> str:
        found = instance_key_for(os.environ, Path(self.data_dir))
        if found is None:
            raise RuntimeError("no instance key: set FLOKIT_SECRET_KEY or run `flokit db upgrade` to create one")
        return found
