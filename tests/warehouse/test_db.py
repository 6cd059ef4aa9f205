"""SQLite writers from several processes queue on the writer lock: none fails, none overlaps; an
open read never holds up a write, on either database."""

import multiprocessing
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support import ROOT
from warehouse import migrate
from warehouse.availability import unavailable
from warehouse.db import PG_CONNECT_TIMEOUT_S, SQLITE_BUSY_TIMEOUT_MS, Database
from warehouse.tables import workspaces

HOLDER = """
import sys, time
from warehouse.db import Database
db = Database(sys.argv[1])
with db.write() as conn:
    conn.exec_driver_sql("INSERT INTO probe VALUES ('holder', 1)")
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_process_waits_for_the_writer_and_then_writes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'flokit.db'}"
    db = Database(url)
    migrate.upgrade(db)
    with db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE probe (who TEXT, n INTEGER)")
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "1.0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        started = time.monotonic()
        with db.write() as conn:  # queued behind the other process's open transaction
            waited = time.monotonic() - started
            seen = conn.exec_driver_sql("SELECT count(*) FROM probe").scalar()
            conn.exec_driver_sql("INSERT INTO probe VALUES ('second', 2)")
    assert holder.returncode == 0
    assert waited > 0.5 and seen == 1  # it began only after the holder committed
    with db.read() as conn:
        assert conn.execute(sa.text("SELECT who FROM probe ORDER BY n")).scalars().all() == ["holder", "second"]
    assert (tmp_path / "flokit.db.writers").exists()
    db.dispose()


def test_sqlite_connections_run_in_wal_mode_with_the_busy_timeout(tmp_path: Path) -> None:
    """SQLite's own connection settings, so no PostgreSQL case: WAL (readers and the writer never
    wait for each other), `synchronous=NORMAL` (docs/reliability.md's durability claim) and the
    busy timeout writers outside the queue (migrations) wait before failing."""
    db = Database(f"sqlite:///{tmp_path / 'flokit.db'}")
    try:
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == SQLITE_BUSY_TIMEOUT_MS
    finally:
        db.dispose()


def test_an_open_read_never_holds_up_a_write(db: Database) -> None:
    """A read transaction left open (a report's queries, a gateway read) while a write commits:
    the write goes through at once and the reader never saw it uncommitted. What WAL gives
    SQLite, whose rollback journal would make the commit wait for the reader until the busy
    timeout and then fail ("database is locked"); what PostgreSQL's snapshots give it, as long
    as `Database.read` takes no lock a writer needs."""
    created = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    with db.read() as reader:
        assert reader.execute(sa.select(sa.func.count()).select_from(workspaces)).scalar_one() == 0
        with db.write() as writer:
            if not db.is_sqlite:  # a write blocked by this thread's own read would wait for ever
                writer.exec_driver_sql("SET LOCAL lock_timeout = '5s'")  # fail as SQLite's busy timeout does
            writer.execute(workspaces.insert().values(id="ws_during", name="Written during a read", created_at=created))
            assert reader.execute(sa.select(workspaces.c.id)).scalars().all() == []  # not committed yet
    with db.read() as conn:
        assert conn.execute(sa.select(workspaces.c.id)).scalars().all() == ["ws_during"]


def test_the_hot_path_keeps_its_connection_but_never_a_transaction(db: Database) -> None:
    """`driver_autocommit` pins one connection per thread; a SQLAlchemy statement run on it
    (which would leave a transaction open into the next request) gets it replaced."""
    with db.driver_autocommit() as first:
        pass
    with db.driver_autocommit() as again:
        assert again is first
        again.execute(sa.text("SELECT 1"))  # SQLAlchemy begins a transaction here
    assert first.invalidated or first.closed
    with db.driver_autocommit() as fresh:
        assert fresh is not first and not fresh.in_transaction()
        assert fresh.connection.driver_connection.execute("SELECT 1").fetchone() == (1,)
    db.dispose()
    assert fresh.closed


def test_a_forked_process_pins_its_own_connection_and_leaves_the_parents(db: Database) -> None:
    """A worker forked after the parent pinned a connection opens its own, and closing its
    database (dispose) never closes the parent's: on PostgreSQL that would end the parent's
    session through the shared socket."""
    with db.driver_autocommit() as parent:
        assert parent.connection.driver_connection.execute("SELECT 1").fetchone() == (1,)
    fork = multiprocessing.get_context("fork")
    answers = fork.Queue()

    def child() -> None:
        with db.driver_autocommit() as own:
            answers.put(own is not parent and own.connection.driver_connection.execute("SELECT 1").fetchone() == (1,))
        db.dispose()

    worker = fork.Process(target=child)
    worker.start()
    worker.join(30)
    assert answers.get(timeout=5) is True and worker.exitcode == 0
    with db.driver_autocommit() as again:
        assert again is parent
        assert again.connection.driver_connection.execute("SELECT 1").fetchone() == (1,)


def test_a_silent_postgresql_host_fails_within_the_connect_timeout() -> None:
    """A host that accepts the TCP connection and never answers (a hung server, a black-holed
    route behind a proxy): the request fails in seconds, as an outage, instead of holding its
    worker until gunicorn kills it 30 s later."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes handshakes; nobody ever reads or writes
        db = Database(f"postgresql+psycopg://flokit@127.0.0.1:{silent.getsockname()[1]}/flokit")
        started = time.monotonic()
        try:
            with pytest.raises(sa.exc.OperationalError) as failure, db.read() as conn:
                conn.execute(sa.text("SELECT 1"))
        finally:
            db.dispose()
    took = time.monotonic() - started
    assert unavailable(failure.value) is not None
    assert PG_CONNECT_TIMEOUT_S - 0.5 <= took < PG_CONNECT_TIMEOUT_S + 3, took
