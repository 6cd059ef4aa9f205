"""Alembic migrations, run programmatically (`flokit db upgrade`, `flokit up`, tests).

The history is linear with one head: revision 0060 merged the five branches the first features
grew side by side (0003, 0010, 0020, 0030, 0050), so a new migration has one parent. Write one
with `alembic -c warehouse/migrations/alembic.ini revision --autogenerate --rev-id <next number>
-m "..."` (against FLOKIT_DATABASE_URL, or the data directory's SQLite file): it compares the migrated database
with `target_metadata()` under the options of `comparison_options`, the same comparison
`drift` makes and tests/warehouse/test_schema_drift.py requires to be empty on both databases.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from warehouse.db import Database

_MIGRATIONS = Path(__file__).parent / "migrations"

# Every module that declares tables on `warehouse.tables.metadata`: Alembic compares the database
# with all of them (a module missing here would read as "drop its tables"; a test walks the
# package and checks that none is).
TABLE_MODULES = (
    "warehouse.tables",
    "warehouse.actions.tables",
    "warehouse.adaccounts.tables",
    "warehouse.dashboard.tables",
    "warehouse.events.tables",
    "warehouse.experiments.tables",
    "warehouse.ingest.tables",
    "warehouse.integrations.tables",
    "warehouse.paywalls.tables",
    "warehouse.entitlements.tables",
    "warehouse.reports.tables",
    "warehouse.signing.tables",
    "warehouse.webhooks.tables",
)


def target_metadata() -> sa.MetaData:
    """The one `MetaData` of the operational database, with every table module's tables on it."""
    for name in TABLE_MODULES:
        importlib.import_module(name)
    from warehouse.tables import metadata

    return metadata


def comparison_options(dialect_name: str) -> dict[str, Any]:
    """How the migrated schema is compared with `target_metadata()` (autogenerate and `drift`).

    Types and server defaults are compared on both databases: neither is noisy here (SQLite
    reflects the declared type names; `UTCDateTime` compares as its `DateTime`). Alembic does not
    compare CHECK constraints at all; tests/warehouse/test_schema_drift.py compares those.
    """
    return {
        "compare_type": True,
        "compare_server_default": True,
        "include_object": _built_on(dialect_name),
    }


def _built_on(dialect_name: str) -> Callable[..., bool]:
    """Leave out the objects `metadata.create_all` would not build on this database: an index
    declared `.ddl_if(dialect="postgresql")` (event_claims' BRIN) is absent from SQLite by design,
    and autogenerate ignores `ddl_if` (sqlalchemy/alembic#1491), so it would report it missing."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        condition = getattr(obj, "_ddl_if", None)
        if condition is None or condition.dialect is None:
            return True
        dialects = (condition.dialect,) if isinstance(condition.dialect, str) else tuple(condition.dialect)
        return dialect_name in dialects

    return include


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@contextmanager
def migration_transaction(conn: sa.Connection) -> Iterator[None]:
    """The one transaction a migration run makes on `conn` (here and from the `alembic` command).

    On SQLite, foreign keys are not enforced while migrations run and are checked once before the
    commit: changing a table there means recreating it (Alembic's batch mode), and dropping the
    old copy of a table other rows refer to would fail. That is SQLite's own recipe for schema
    changes (https://sqlite.org/lang_altertable.html#otheralter); the PRAGMA only takes effect
    outside a transaction, so it is set on the driver's connection before SQLAlchemy begins one.
    """
    sqlite = conn.dialect.name == "sqlite"
    if sqlite:
        conn.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")  # type: ignore[union-attr]
    try:
        with conn.begin():
            yield
            if sqlite:
                broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                if broken:
                    raise RuntimeError(f"the migration left rows whose foreign keys point nowhere: {broken[:5]}")
    finally:
        if sqlite:
            conn.connection.driver_connection.execute("PRAGMA foreign_keys=ON")  # type: ignore[union-attr]


@contextmanager
def _migrating(db: Database) -> Iterator[Config]:
    """An Alembic config whose env.py runs on one connection of `db`, in `migration_transaction`."""
    config = alembic_config(db.url)
    with db.engine.connect() as conn, migration_transaction(conn):
        config.attributes["connection"] = conn
        yield config


def upgrade(db: Database, revision: str = "head") -> list[str]:
    """Migrate to `revision` (default: the head) and return the revisions now applied."""
    with _migrating(db) as config:
        command.upgrade(config, revision)
    return current(db)


def downgrade(db: Database, revision: str) -> list[str]:
    with _migrating(db) as config:
        command.downgrade(config, revision)
    return current(db)


def current(db: Database) -> list[str]:
    """The revisions the database is at: one, the head, once migrated (several only for a
    database migrated before 0060 merged the branches, until its next upgrade)."""
    with db.engine.connect() as conn:
        return sorted(MigrationContext.configure(conn).get_current_heads())


def head() -> str:
    """The one head of the history (alembic raises if a new migration forked it)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration history is empty")
    return head


def drift(db: Database) -> list[Any]:
    """What `alembic revision --autogenerate` would write for this database: empty when the
    migrated schema is the tables' metadata."""
    with db.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=comparison_options(conn.dialect.name))
        return list(compare_metadata(context, target_metadata()))
