"""Per-worker cache of the ledger rows an entitlement read needs; the verdict is computed from
them at every read, against the clock of that read.

What is cached per (publishable key, user) is the key's app and the user's purchases in it
(kind, revoked_at, access_ends_at, channel), exactly as the driver returns them. The verdict is
never cached: a period that ends reads inactive at that moment, with no write. A cached entry is
only ever trusted while the worker can prove nothing changed it since it was read:

- PostgreSQL: every write to the ledger's rows and every change of an app's key sends
  `pg_notify(CHANNEL, '<app_id>:<user_id>')` (or `'<app_id>:*'`, or `':*'` for a TRUNCATE) in
  its own transaction, delivered to listeners at commit. The database sends them, from triggers
  (migration 0235), so a write made outside FloKit's code (an operator's SQL) reaches every
  worker too. Each worker keeps one listening connection and drains it, without blocking, before
  every read. A read that misses records the generation before it reads the rows and stores them
  only if no notification arrived meanwhile, so rows read before a change are never kept after
  it. A lost listening connection drops the cache and bypasses it (every read goes to the
  database) until a new one listens again. The window left: PostgreSQL sends listeners the
  notification while the writer's commit returns, not before, so a read on another worker racing
  that commit by a few milliseconds may still answer from the rows before it (measured under
  load: 6 % of listeners were behind the writer's return, by 5 ms at worst). The writing
  process itself has no window: `notify` marks the rows pending in its own cache, read from the
  database and not kept until their notification comes back.
- SQLite (one host by construction): `PRAGMA data_version` on the reader's own pinned
  connection changes whenever another connection committed anything; the cache of that
  connection is dropped then, with no window: the commit is in the shared WAL index before the
  writer returns. Any write flushes it (an ingest callback too), which is crude but costs one
  in-process pragma, and with no write the rows are reused; rows read after the pragma may be
  newer than it, never older.

Rows are compared in the database's own representation (SQLite's text timestamps, PostgreSQL's
naive UTC datetimes) with "now" bound by the column type's own processor, so the comparison is
the one the SQL of `ledger.current_for_key` makes. Unknown or revoked keys are not cached.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine

from warehouse.db import PG_CONNECT_TIMEOUT_S, Database, utcnow
from warehouse.driver import driver_statement
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.tables import apps

CHANNEL = "flokit_entitlements"
ALL_USERS = "*"
MAX_ENTRIES = 100_000  # per worker; the oldest entry goes first beyond it
# Defence in depth only: every write notifies (triggers), so an entry is never stale for want of a
# notification that FloKit's code forgot. It was 60 s before the triggers; at that age the share of
# reads that miss grew as the host served fewer reads a second (docs/benchmarks.md).
MAX_AGE_S = 900.0
DRAIN_ROUNDS = 8  # a socket still readable after this many is at its EOF (or flooded: dropped too)
RECONNECT_EVERY_S = 1.0  # a lost listener is retried at most this often, on the read path
PENDING_S = 5.0  # how long a change written here waits for its notification (a rollback sends none)

log = logging.getLogger(__name__)

Row = tuple[Any, ...]  # (kind, revoked_at, access_ends_at, channel) as the driver returns them


@dataclass(frozen=True)
class Entry:
    app_id: str
    grants: tuple[Row, ...]
    stored_at: float


def _rows_statement() -> sa.Select[Any]:
    return (
        sa.select(apps.c.id, g.c.kind, g.c.revoked_at, g.c.access_ends_at, g.c.channel)
        .select_from(apps)
        .outerjoin(g, (g.c.app_id == apps.c.id) & (g.c.user_id == sa.bindparam("user_id")))
        .where(apps.c.publishable_key == sa.bindparam("publishable_key"), apps.c.revoked_at.is_(None))
    )


def read_rows(conn: Connection, *, publishable_key: str, user_id: str) -> Entry | None:
    """The key's app and the user's purchases in it (one driver statement), or None when the key
    is unknown or revoked."""
    rows = driver_statement(conn, "entitlement_rows_for_key", _rows_statement).execute(
        conn, {"user_id": user_id, "publishable_key": publishable_key}
    )
    if not rows:
        return None
    grants = tuple(tuple(r[1:]) for r in rows if r[1] is not None)
    return Entry(rows[0][0], grants, time.monotonic())


_NOW_PROCESSORS: dict[str, Callable[[Any], Any] | None] = {}


def bound_now(dialect: Dialect, now: datetime | None = None) -> Any:
    """The clock (`now`, else the current time) as the database compares it (the column type's
    bind processor)."""
    name = dialect.name
    if name not in _NOW_PROCESSORS:
        _NOW_PROCESSORS[name] = g.c.access_ends_at.type.dialect_impl(dialect).bind_processor(dialect)
    processor = _NOW_PROCESSORS[name]
    now = now or utcnow()
    return processor(now) if processor else now


def verdict(grants: tuple[Row, ...], now: Any) -> tuple[bool, str | None]:
    """`active` and the deciding purchase's channel, as `ledger.current_for_key`'s SQL orders
    them: active first, then the latest access end (none = lifetime, first). Channel None: the
    user has no purchase."""
    best: tuple[bool, bool, Any] | None = None
    channel: str | None = None
    for kind, revoked_at, ends_at, row_channel in grants:
        active = (
            kind != "consumable" and (revoked_at is None or revoked_at > now) and (ends_at is None or ends_at > now)
        )
        rank = (active, ends_at is None, ends_at)
        if best is None or _above(rank, best):
            best, channel = rank, row_channel
    return (best is not None and best[0]), channel


def _above(a: tuple[bool, bool, Any], b: tuple[bool, bool, Any]) -> bool:
    if a[:2] != b[:2]:
        return a[:2] > b[:2]
    return a[2] is not None and b[2] is not None and a[2] > b[2]


class _Rows:
    """Bounded map (publishable key, user) -> Entry, oldest out first."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], Entry] = {}
        self.key_of_app: dict[str, str] = {}

    def get(self, key: tuple[str, str]) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None and time.monotonic() - entry.stored_at > MAX_AGE_S:
            del self.entries[key]
            return None
        return entry

    def put(self, key: tuple[str, str], entry: Entry) -> None:
        if len(self.entries) >= MAX_ENTRIES:
            self.entries.pop(next(iter(self.entries)))
        self.entries[key] = entry
        self.key_of_app[entry.app_id] = key[0]

    def invalidate(self, payload: str) -> None:
        app_id, _, user = payload.partition(":")
        publishable_key = self.key_of_app.get(app_id)
        if user == ALL_USERS or not user:
            self.clear()  # a revoked app: rare, so everything goes
        elif publishable_key is not None:
            self.entries.pop((publishable_key, user), None)

    def clear(self) -> None:
        self.entries.clear()
        self.key_of_app.clear()


class PostgresReads:
    """One per worker process: the listening connection, the rows, the generation."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._rows = _Rows()
        self._generation = 0
        self._listener: Any = None  # a psycopg connection in autocommit, LISTENing
        self._open: list[Any] = []  # the listener, for the finalizer (which must not hold self)
        self._retry_at = 0.0
        self._poll = select.poll()
        self._pending: dict[str, float] = {}  # payloads this process wrote -> until when to wait for them
        self._failing = False  # the last attempt to listen failed (and was logged)
        weakref.finalize(self, _close_all, self._open)

    def close(self) -> None:
        """Close the listening connection (the database is being disposed)."""
        with self._lock:
            self._listener = None
            _close_all(self._open)

    def _listen(self) -> None:
        """Open the listening connection (the cache starts empty); on failure, retry later."""
        if time.monotonic() < self._retry_at:
            return
        self._retry_at = time.monotonic() + RECONNECT_EVERY_S
        dialect = self._engine.dialect
        try:
            cargs, cparams = dialect.create_connect_args(self._engine.url)
            options = {**cparams, "autocommit": True, "connect_timeout": PG_CONNECT_TIMEOUT_S}
            conn = dialect.loaded_dbapi.connect(*cargs, **options)
            conn.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:  # the database is away: reads go to it uncached (and fail there if it is)
            if not self._failing:  # one line per outage, not one a second
                log.warning("entitlement cache: cannot listen for changes (%s); reads are uncached", type(exc).__name__)
            self._failing = True
            return
        self._failing = False
        self._listener = conn
        self._poll = select.poll()  # not select(): a worker's descriptors may pass FD_SETSIZE
        self._poll.register(conn.pgconn.socket, select.POLLIN)
        self._open.append(conn)
        self._rows.clear()
        self._generation += 1

    def _drain(self) -> bool:
        """Apply every notification already received; False when not listening (cache unusable).
        Caller holds the lock."""
        if self._listener is None:
            self._listen()
            if self._listener is None:
                return False
        pgconn = self._listener.pgconn
        try:
            # Only a readable socket has anything to consume (one poll, no read, on most reads).
            # After the server's goodbye (`pg_terminate_backend`, a restart) consuming succeeds
            # once with the socket still readable: its EOF, which the next consume raises on.
            for _ in range(DRAIN_ROUNDS):
                if not self._poll.poll(0):
                    break
                pgconn.consume_input()
                while (notify := pgconn.notifies()) is not None:
                    payload = notify.extra.decode()
                    self._rows.invalidate(payload)
                    self._pending.pop(payload, None)
                    self._generation += 1
            else:
                raise ConnectionError("the listening connection stays readable: closed by the server")
            if pgconn.status != 0:  # CONNECTION_OK
                raise ConnectionError("the listening connection is not OK")
        except Exception:
            log.warning("entitlement cache: listening connection lost; reads are uncached until it is back")
            self._lost()
            return False
        return True

    def _lost(self) -> None:
        self._listener = None
        self._rows.clear()
        self._generation += 1
        _close_all(self._open)

    def expect(self, payload: str) -> None:
        """This process is writing a change of `payload`'s rows: until its notification comes
        back (so after the commit), those rows are read from the database and not kept. Without
        it, this process's own next read could still find the rows from before its write: the
        listener is sent the notification while the commit returns, not before."""
        with self._lock:
            self._pending[payload] = time.monotonic() + PENDING_S
            self._rows.invalidate(payload)
            self._generation += 1

    def _blocked(self, app_id: str, user_id: str) -> bool:
        """A change of these rows written here is not back from the listener yet. Caller holds the lock."""
        if not self._pending:
            return False
        now = time.monotonic()
        for payload in (f"{app_id}:{user_id}", f"{app_id}:{ALL_USERS}"):
            deadline = self._pending.get(payload)
            if deadline is not None:
                if deadline > now:
                    return True
                del self._pending[payload]  # never committed (rolled back): nothing will come
        return False

    def read(self, db: Database, *, publishable_key: str, user_id: str) -> Entry | None:
        key = (publishable_key, user_id)
        with self._lock:
            listening = self._drain()
            entry = self._rows.get(key) if listening else None
            if entry is not None and self._blocked(entry.app_id, user_id):
                entry = None
            generation = self._generation
        if entry is not None:
            return entry  # no database connection touched
        with db.driver_read() as conn:
            entry = read_rows(conn, publishable_key=publishable_key, user_id=user_id)
        if entry is not None and listening:
            with self._lock:
                # Stored only if nothing was invalidated since before the rows were read.
                if self._drain() and self._generation == generation and not self._blocked(entry.app_id, user_id):
                    self._rows.put(key, entry)
        return entry


def _close_all(conns: list[Any]) -> None:
    while conns:
        with suppress(Exception):  # already dead: nothing left to close
            conns.pop().close()


class SqliteReads:
    """Per thread (its own pinned connection): rows valid while `PRAGMA data_version` holds."""

    def __init__(self) -> None:
        self._local = threading.local()

    def read(self, db: Database, *, publishable_key: str, user_id: str) -> Entry | None:
        with db.driver_read() as conn:
            dbapi = conn.connection.driver_connection
            assert dbapi is not None, "a checked-out connection has its driver connection"
            version = dbapi.execute("PRAGMA data_version").fetchone()[0]
            state: tuple[Any, int, _Rows] | None = getattr(self._local, "state", None)
            if state is None or state[0] is not dbapi or state[1] != version:
                state = self._local.state = (dbapi, version, _Rows())
            rows = state[2]
            key = (publishable_key, user_id)
            entry = rows.get(key)
            if entry is None:
                entry = read_rows(conn, publishable_key=publishable_key, user_id=user_id)
                if entry is not None:
                    rows.put(key, entry)
        return entry


_READS: weakref.WeakKeyDictionary[Database, tuple[int, PostgresReads | SqliteReads]] = weakref.WeakKeyDictionary()
_READS_LOCK = threading.Lock()


def reads_for(db: Database) -> PostgresReads | SqliteReads:
    """This process's cache for `db` (a forked worker builds its own: never its parent's
    listening connection); it goes, with its listening connection, when `db` does."""
    pid = os.getpid()
    found = _READS.get(db)
    if found is None or found[0] != pid:
        with _READS_LOCK:
            found = _READS.get(db)
            if found is None or found[0] != pid:
                reads = PostgresReads(db.engine) if db.engine.dialect.name == "postgresql" else SqliteReads()
                if isinstance(reads, PostgresReads):
                    db.on_dispose(reads.close)
                found = _READS[db] = (pid, reads)
    return found[1]


def notify(conn: Connection, app_id: str, user_id: str | None) -> None:
    """This process is changing the rows of (app, user) in this transaction (`user_id` None: the
    whole app, its key was revoked). The database's triggers tell every worker's cache at commit
    (PostgreSQL; SQLite's readers notice any commit by themselves); what is left to do here is
    this process's own cache, which must not serve the rows before the change while that
    notification is on its way back."""
    if conn.dialect.name != "postgresql":
        return
    payload = f"{app_id}:{ALL_USERS if user_id is None else user_id}"
    pid = os.getpid()
    for owner, reads in list(_READS.values()):
        if owner == pid and isinstance(reads, PostgresReads):
            reads.expect(payload)
