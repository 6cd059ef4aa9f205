"""Engines for the operational database: SQLite (embedded default) or PostgreSQL (production).

SQLite is configured for a multi-process server: WAL so that readers never block the writer,
a busy timeout so that concurrent writers queue instead of failing, and `BEGIN IMMEDIATE` for
write transactions so that two writers never both read and then deadlock on the upgrade to a
write lock (SQLite's classic "database is locked" under concurrency).
"""

from __future__ import annotations

import fcntl
import os
import select
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from warehouse.settings import DATA_DIR_MODE

# How long a SQLite writer waits for the lock before giving up. Generous: a request that waits
# is better than a request that fails, and real contention resolves in milliseconds.
SQLITE_BUSY_TIMEOUT_MS = 10_000

# Seconds to establish a PostgreSQL connection (libpq's connect_timeout) before giving up.
PG_CONNECT_TIMEOUT_S = 5

_WRITE = "flokit_write"

# The SQLite files hold the webhook signing secrets: owner-only (0600) whatever the umask, as is
# the directory FloKit creates for them (DATA_DIR_MODE, 0700).
SQLITE_FILE_MODE = 0o600


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
        # NORMAL is durable across application crashes in WAL mode; only an OS crash or power
        # loss may roll back the last transactions, the documented trade-off for WAL.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite URL; None for PostgreSQL and in-memory databases."""
    path = url.removeprefix("sqlite:///").split("?", 1)[0] if url.startswith("sqlite:///") else ""
    return Path(path) if path and path != ":memory:" else None


def sqlite_files(path: Path) -> list[Path]:
    """The database file and the files SQLite and FloKit keep beside it (some may not exist)."""
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal", ".writers"))]


def _create_owner_only(path: Path) -> None:
    """Create the database file 0600 before SQLite would (0644 minus the umask). SQLite gives the
    -wal, -shm and -journal files it creates later the database file's own mode."""
    path.parent.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    with suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SQLITE_FILE_MODE))


def create_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        path = sqlite_path(url)
        if path is not None:
            _create_owner_only(path)
        # The driver's `timeout` is SQLite's busy timeout: set here, once (a PRAGMA on connect
        # used to set a second, different one over it).
        engine = sa.create_engine(
            url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        )
        _configure_sqlite(engine)
        return engine
    # pool_pre_ping: a server restart must not surface as one failed request per pooled connection.
    # connect_timeout: an unreachable host (no answer, not a refusal) fails a request in seconds
    # with a 503 instead of holding its worker until gunicorn kills it.
    return sa.create_engine(
        url,
        pool_pre_ping=True,
        pool_size=5,
        # A gunicorn worker's threads (FLOKIT_WORKER_THREADS) may each hold a pinned connection and a
        # pooled one at once.
        max_overflow=15,
        connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S},
    )


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
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, SQLITE_FILE_MODE)
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


class PinnedConnections:
    """One connection per thread, checked out of the engine's pool once and kept (see
    `Database._pinned`). A forked process never uses its parent's: it pins its own."""

    def __init__(self, engine: Engine, *, autocommit: bool) -> None:
        self._engine = engine
        self._autocommit = autocommit
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[tuple[int, Connection]] = []  # (pid of the process that opened it, connection)

    def take(self) -> Connection:
        pid = os.getpid()
        pinned: tuple[int, Connection] | None = getattr(self._local, "pinned", None)
        if pinned is not None and pinned[0] == pid:
            if _alive(pinned[1]):
                return pinned[1]
            self.drop()
        conn = self._engine.connect()
        if self._autocommit:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        self._local.pinned = (pid, conn)
        with self._lock:
            # A forked child forgets its parent's connections: closing them is the parent's to do.
            self._all = [(owner, c) for owner, c in self._all if owner == pid]
            self._all.append((pid, conn))
        return conn

    def drop(self) -> None:
        """Forget this thread's connection and close it (SQLAlchemy discards a broken one)."""
        pinned: tuple[int, Connection] | None = getattr(self._local, "pinned", None)
        self._local.pinned = None
        if pinned is None or pinned[0] != os.getpid():
            return
        with self._lock:
            self._all = [(owner, c) for owner, c in self._all if c is not pinned[1]]
        with suppress(Exception):  # already dead: nothing left to close
            pinned[1].invalidate()  # closes the DBAPI connection rather than pooling it again

    def close_all(self) -> None:
        with self._lock:
            conns = [c for owner, c in self._all if owner == os.getpid()]
            self._all = []
        for conn in conns:
            with suppress(Exception):  # closing a dead connection must not fail dispose()
                conn.close()


def _alive(conn: Connection) -> bool:
    """False if the DBAPI connection is closed, or is an idle socket with something to read
    (the server's goodbye or EOF: it was terminated or restarted). SQLite is always alive."""
    if conn.invalidated or conn.closed:
        return False
    dbapi = conn.connection.driver_connection
    fileno = getattr(dbapi, "fileno", None)
    if fileno is None:
        return True
    if getattr(dbapi, "closed", False) or getattr(dbapi, "broken", False):
        return False
    try:
        poller = select.poll()  # not select.select: no limit on descriptor numbers
        poller.register(fileno(), select.POLLIN)
        return not poller.poll(0)
    except Exception:  # a connection that cannot say its socket is not usable
        return False


class Database:
    """One engine per process, with explicit read and write transactions."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = create_engine(url)
        self.is_sqlite = url.startswith("sqlite")
        path = sqlite_path(url)
        self._writers = WriterQueue(path) if path is not None else None
        self._pins = PinnedConnections(self.engine, autocommit=not self.is_sqlite)
        self._closers: list[Callable[[], None]] = []

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
        statement through SQLAlchemy inside it would begin a second transaction and fail loudly.
        Runs on this thread's pinned connection (`_pinned`)."""
        assert self._writers is not None, "driver_write is for SQLite files"
        with self._pinned() as conn, self._writers.hold():
            dbapi = conn.connection.driver_connection
            assert dbapi is not None, "a checked-out connection has its driver connection"
            dbapi.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                dbapi.execute("ROLLBACK")
                raise
            dbapi.execute("COMMIT")

    def driver_autocommit(self) -> AbstractContextManager[Connection]:
        """Each statement commits on its own: for hot paths whose every write is ONE driver
        statement (atomic by itself), saving the BEGIN and COMMIT round trips of a transaction.
        Runs on this thread's pinned connection (`_pinned`)."""
        return self._pinned()

    def driver_read(self) -> AbstractContextManager[Connection]:
        """For hot reads that are ONE driver statement (a statement is its own consistent
        snapshot on both databases): this thread's pinned connection, no transaction around it."""
        return self._pinned()

    @contextmanager
    def _pinned(self) -> Iterator[Connection]:
        """This thread's long-lived connection, for the hot paths above.

        Checking a connection out of the pool and back in costs about as much as a statement
        (SQLAlchemy's bookkeeping, the reset on return, and on PostgreSQL `pool_pre_ping`'s
        `SELECT 1` round trip). A pinned connection skips all three. What the ping was for, a
        server restart, is caught instead by a poll of the idle socket: the server only writes
        to an idle connection to say it is closing it, so a readable socket means a dead
        connection, replaced before use. A connection that raised a database error is dropped
        (replaced on the next use), never reused in an unknown state.
        """
        conn = self._pins.take()
        try:
            yield conn
        except BaseException as exc:
            if isinstance(exc, (sa.exc.DBAPIError, self.engine.dialect.loaded_dbapi.Error)):
                self._pins.drop()
            raise
        if conn.in_transaction():  # someone ran a SQLAlchemy statement on it: never carry that over
            self._pins.drop()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def on_dispose(self, close: Callable[[], None]) -> None:
        """Run `close` when this database is disposed (connections held beside the engine's pool,
        such as a cache's listening connection)."""
        self._closers.append(close)

    def dispose(self) -> None:
        while self._closers:
            self._closers.pop()()
        self._pins.close_all()
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


def open_database_urls() -> set[str]:
    """The URLs this process holds an engine for (an in-process `flokit` in the tests closes the
    ones it opened, as its process would have on exit)."""
    with _lock:
        return set(_databases)


def close_database(url: str) -> None:
    """Dispose of a URL's engine and forget it (tests create many short-lived databases)."""
    with _lock:
        db = _databases.pop(url, None)
    if db is not None:
        db.dispose()
