"""Alembic environment: run migrations on the connection or URL handed over by `warehouse.migrate`."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context

from warehouse.tables import metadata

config = context.config


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = sa.create_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.connect() as conn:
            _run_on(conn)
        engine.dispose()
    else:
        _run_on(connection)


def _run_on(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things in place; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run()
