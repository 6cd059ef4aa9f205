"""Engines for the operational database: SQLite (embedded default) or PostgreSQL (production).

SQLite is configured for a multi-process server: WAL so that readers never block the writer,
a busy timeout so that concurrent writers queue instead of failing, and `BEGIN IMMEDIATE` for
write transactions so that two writers never both read and then deadlock on the upgrade to a
write lock (SQLite's classic "database is locked" under concurrency).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

# How long a SQLite writer waits for the lock before giving up. Generous: a request that waits
# is better than a request that fails, and real contention resolves in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 10_000

_WRITE = "flokit_write"


def utcnow() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(sa.types.TypeDecorator):
    """Timestamps stored as naive UTC on both databases and returned timezone-aware.

    SQLite has no time zone support; storing naive UTC everywhere keeps comparisons and
    ordering identical on both backends.
    """

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


def _configure_sqlite(engine: Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's begin event below decide how transactions start.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        # NORMAL is durable across application crashes in WAL mode; only an OS crash or power
        # loss may roll back the last transactions, the documented trade-off for WAL.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def create_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        _configure_sqlite(engine)
        return engine
    # pool_pre_ping: a server restart must not surface as one failed request per pooled connection.
    return sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)


class WriterQueue:
    """Write transactions on one SQLite file, queued in the kernel across processes.

    SQLite admits one writer at a time; a writer that finds the lock taken polls it with sleeps
    of 1, 2, 5, 10 ms and more (its busy handler), while the transaction it waits for takes a
    fraction of a millisecond. Under concurrent writers (gunicorn workers landing callbacks)
    most of the time was spent asleep with the lock free. An exclusive `flock` on a file beside
    the database, taken before `BEGIN IMMEDIATE`, queues writers instead: the kernel wakes the
    next one the moment the lock is released. SQLite's own locking stays in force underneath
    (writers that do not take the queue, such as migrations, still wait on SQLite's busy timeout).
    """

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".writers")
        self._threads = threading.Lock()  # flock does not exclude threads sharing one descriptor
        self._fd: int | None = None
        self._pid = 0

    def _descriptor(self) -> int:
        if self._fd is None or self._pid != os.getpid():  # a forked worker opens its own
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self._pid = os.getpid()
        return self._fd

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._threads:
            fd = self._descriptor()
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)


class Database:
    """One engine per process, with explicit read and write transactions."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_engine(url)
        self.is_sqlite = url.startswith("sqlite")
        path = url.removeprefix("sqlite:///") if self.is_sqlite else ""
        self._writers = WriterQueue(Path(path)) if path and path != ":memory:" else None

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on any exception."""
        queue = self._writers.hold() if self._writers else nullcontext()
        # The connection first, then the queue: only BEGIN ... COMMIT is spent holding it.
        with self.engine.connect().execution_options(**{_WRITE: True}) as conn, queue, conn.begin():
            yield conn

    @contextmanager
    def driver_write(self) -> Iterator[Connection]:
        """SQLite: a write transaction begun and ended on the DBAPI connection itself, for code
        that runs only driver statements (`warehouse/driver.py`): SQLAlchemy's begin and commit
        bookkeeping was the largest cost left above the database on the ingest hot path. A
        statement through SQLAlchemy inside it would begin a second transaction and fail loudly."""
        assert self._writers is not None, "driver_write is for SQLite files"
        with self.engine.connect() as conn, self._writers.hold():
            dbapi = conn.connection.driver_connection
            dbapi.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                dbapi.execute("ROLLBACK")
                raise
            dbapi.execute("COMMIT")

    @contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """Each statement commits on its own: for hot paths whose every write is ONE statement
        (atomic by itself), saving the BEGIN and COMMIT round trips of a transaction."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        self.engine.dispose()


_databases: dict[str, Database] = {}
_lock = threading.Lock()


def database_for(url: str) -> Database:
    """The process-wide `Database` for a URL (engines are pools; make one per process)."""
    with _lock:
        db = _databases.get(url)
        if db is None:
            db = _databases[url] = Database(url)
        return db


def close_database(url: str) -> None:
    """Dispose of a URL's engine and forget it (tests create many short-lived databases)."""
    with _lock:
        db = _databases.pop(url, None)
    if db is not None:
        db.dispose()
