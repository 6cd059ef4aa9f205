"""Alembic migrations, run programmatically (`flokit db upgrade`, `flokit up`, tests)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from warehouse.db import Database

_MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(db: Database, revision: str = "heads") -> list[str]:
    """Migrate to `revision` (default: every head) and return the revisions now applied."""
    config = alembic_config(db.url)
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    return current(db)


def downgrade(db: Database, revision: str) -> list[str]:
    config = alembic_config(db.url)
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)
    return current(db)


def current(db: Database) -> list[str]:
    with db.engine.connect() as conn:
        return sorted(MigrationContext.configure(conn).get_current_heads())


def heads(db: Database) -> list[str]:
    return sorted(ScriptDirectory.from_config(alembic_config(db.url)).get_heads())
