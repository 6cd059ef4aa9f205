"""Alembic environment: run migrations on the connection handed over by `warehouse.migrate`, or,
from the `alembic` command (alembic.ini here), on FLOKIT_DATABASE_URL or the data directory's file."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from warehouse import migrate
from warehouse.db import create_engine
from warehouse.settings import Settings

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = create_engine(_url())  # FloKit's: an owner-only SQLite file, in WAL mode
        with engine.connect() as conn, migrate.migration_transaction(conn):
            _run_on(conn)
        engine.dispose()
    else:
        _run_on(connection)


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    return Settings.from_env().database_url


def _run_on(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=migrate.target_metadata(),
        # SQLite cannot ALTER most things in place; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        **migrate.comparison_options(connection.dialect.name),
    )
    with context.begin_transaction():
        context.run_migrations()


run()
