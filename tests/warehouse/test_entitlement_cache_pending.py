"""The read cache's guard for this process's own writes (PostgreSQL's `PostgresReads.expect`).

A process that writes a user's ledger rows is told of its change by its own LISTEN connection a
moment after the commit returns. Until then its reads of those rows go to the database and are not
kept, so its own next read is never older than its write. A change announced but never committed
(rolled back) sends no notification: after `cache.PENDING_S` the rows are kept again. The test
drives the guard through `expect` itself, without a write, so that no notification can arrive and
the outcome does not depend on when one would (the HTTP tests in tests/api/test_entitlement_read_cache.py
prove the same end to end, racing the notification).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.databases import fresh_database_url
from tests.support.entitlements import fact, receipt
from warehouse.bootstrap import bootstrap
from warehouse.db import database_for
from warehouse.entitlements import cache

pytestmark = pytest.mark.postgres


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """PostgreSQL alone: SQLite's reads check `PRAGMA data_version` and have no pending writes."""
    yield from fresh_database_url(request, "postgres", tmp_path)


def test_rows_being_written_here_are_not_kept_until_their_notification_or_the_deadline(postgres_url: str) -> None:
    db = database_for(postgres_url)
    with db.write() as conn:
        workspace = bootstrap(conn, name="Acme Fitness")
    receipt(db, workspace, "payer", fact("3000001"))
    reads = cache.PostgresReads(db.engine)
    try:

        def read() -> cache.Entry:
            entry = reads.read(db, publishable_key=workspace["app_key"], user_id="payer")
            assert entry is not None and len(entry.grants) == 1
            return entry

        first = read()
        assert read() is first  # kept: the second read touched no database connection

        reads.expect(f"{workspace['app_id']}:payer")  # this process is writing payer's rows
        announced = time.monotonic()
        during = [read(), read()]
        assert during[0] is not first and during[1] is not during[0]  # each from the database, none kept
        assert during[0].grants == first.grants

        time.sleep(max(0.0, announced + cache.PENDING_S - time.monotonic()) + 0.05)
        after = read()  # no notification came (the write was rolled back): kept again
        assert after is not during[1] and read() is after
    finally:
        reads.close()
