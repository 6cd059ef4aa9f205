"""The durability check names the PostgreSQL settings under which acknowledged writes can vanish."""

from __future__ import annotations

import pytest

from tests.faults.postgres import private_cluster
from warehouse.db import Database
from warehouse.durability import durability_warnings


def test_a_durable_server_and_sqlite_get_no_warning(db: Database) -> None:
    if db.is_sqlite:
        assert durability_warnings(db) == []
        return
    with private_cluster() as cluster:  # configured as production must be
        durable = Database(cluster.url)
        try:
            assert durability_warnings(durable) == []
        finally:
            durable.dispose()


@pytest.mark.postgres
def test_settings_that_lose_commits_are_named(postgres_admin_url: str) -> None:
    """The suite's throwaway cluster skips fsync and full-page writes for speed: both are named,
    with what they risk; synchronous_commit is on there, so it is not."""
    db = Database(postgres_admin_url)
    try:
        warnings = durability_warnings(db)
    finally:
        db.dispose()
    assert [w.split(" = ")[0] for w in warnings] == ["PostgreSQL fsync", "PostgreSQL full_page_writes"]
    assert "production requires fsync = on" in warnings[0] and "OS crash" in warnings[0]
