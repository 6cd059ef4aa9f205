import sqlalchemy as sa

from warehouse import migrate
from warehouse.db import SQLITE_BUSY_TIMEOUT_MS, Database


def test_fresh_database_is_at_every_head(db: Database) -> None:
    assert migrate.current(db) == migrate.heads(db)


def test_migrations_round_trip_to_empty_and_back(db: Database) -> None:
    assert migrate.downgrade(db, "base") == []
    assert "workspaces" not in sa.inspect(db.engine).get_table_names()
    assert migrate.upgrade(db) == migrate.heads(db)
    tables = set(sa.inspect(db.engine).get_table_names())
    assert {"workspaces", "api_keys", "apps", "audit_log"} <= tables


def test_upgrade_is_idempotent(db: Database) -> None:
    first = migrate.upgrade(db)
    assert migrate.upgrade(db) == first


def test_sqlite_runs_in_wal_mode(db: Database) -> None:
    if not db.is_sqlite:
        return
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == SQLITE_BUSY_TIMEOUT_MS
