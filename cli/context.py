"""Settings and database for a CLI invocation, validated before any command runs."""

from __future__ import annotations

from warehouse.db import Database, database_for
from warehouse.settings import DATA_DIR_MODE, Settings, SettingsError


def load_settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise SystemExit(f"flokit: configuration error: {exc}") from exc


def open_database(settings: Settings) -> Database:
    settings.data_dir.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    return database_for(settings.database_url)
