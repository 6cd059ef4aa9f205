"""Waking the webhook drains the moment deliveries become due now, and what a drain waits on.

Every place that makes a delivery due now (the outbox's emit, a redelivery, an endpoint enabled
again) calls `wake_drains` in its own transaction. On PostgreSQL that is `pg_notify`: delivered
to the listeners at COMMIT, never for a rolled-back transaction, and identical notifications of
one transaction are collapsed by the server (a burst of 200 events in one transaction wakes a
drain once). SQLite has no notifications: the drains poll a cheap read instead (`Wakeups`).

A notification is only a wake-up: a woken drain claims with its usual leases (FOR UPDATE SKIP
LOCKED), so a lost or duplicated notification costs latency at worst, never a send.
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from warehouse.db import PG_CONNECT_TIMEOUT_S, Database

log = logging.getLogger(__name__)

CHANNEL = "flokit_webhooks"
# conn.info key: the transaction that already notified (one pg_notify per transaction is enough).
_NOTIFIED = "flokit_webhooks_notified"
# A listening connection idle this long is checked with `SELECT 1`: a half-open TCP connection
# (the server's host gone) raises nothing by itself; keepalives catch it too, within ~25 s.
_CHECK_EVERY_S = 30.0
# After a failed attempt to listen, wait this long before the next (the drain polls meanwhile).
_RECONNECT_EVERY_S = 1.0


def wake_drains(conn: Connection) -> None:
    """Tell the listening drains, at this transaction's commit, that deliveries are due now.

    PostgreSQL: `pg_notify`, once per transaction however many times it is called. SQLite: nothing
    (its drains poll)."""
    if conn.dialect.name != "postgresql":
        return
    transaction = conn.get_transaction()
    if transaction is not None and conn.info.get(_NOTIFIED) is transaction:
        return
    conn.execute(sa.select(sa.func.pg_notify(CHANNEL, "")))
    if transaction is not None:
        conn.info[_NOTIFIED] = transaction


class Wakeups:
    """What a long-lived drain waits on between two drains of the queue.

    `wait(timeout)` returns True when the drain should claim at once (a notification came, or the
    listening connection was just (re)opened: whatever was notified while nobody listened is
    lost, so the drain looks before it waits), False after `timeout` without one (the caller then
    looks with a read whether anything fell due meanwhile, such as a retry whose backoff ended).

    PostgreSQL: a dedicated autocommit psycopg connection that LISTENs (never the pool's: a
    listener inside a transaction receives nothing until it ends, and `notifies()` holds the
    connection while it waits). It connects to `listen_url` when given (a direct or session-pooled
    address: PgBouncer's transaction pooling cannot LISTEN), else to the database's own URL.
    SQLite: no listener; `wait` sleeps `timeout` and returns False (the drain polls).
    """

    def __init__(self, db: Database, listen_url: str | None = None) -> None:
        self._db = db
        self._url = sa.engine.make_url(listen_url) if listen_url else db.engine.url
        self._conn: Any = None
        self._retry_at = 0.0
        self._checked_at = 0.0
        self.listening = not db.is_sqlite

    def close(self) -> None:
        if self._conn is not None:
            with suppress(Exception):  # already dead: nothing left to close
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Wakeups:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _connect(self) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        self._retry_at = time.monotonic() + _RECONNECT_EVERY_S
        dialect = self._db.engine.dialect
        try:
            cargs, cparams = dialect.create_connect_args(self._url)
            options = {
                **cparams,
                "autocommit": True,
                "connect_timeout": PG_CONNECT_TIMEOUT_S,
                # A dead peer is noticed within idle + interval x count = 25 s without traffic.
                "keepalives": 1,
                "keepalives_idle": 10,
                "keepalives_interval": 5,
                "keepalives_count": 3,
            }
            conn = dialect.loaded_dbapi.connect(*cargs, **options)
            conn.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:  # the database is away: the drain polls until it is back
            log.warning("webhook drain: cannot listen for wake-ups (%s: %s)", type(exc).__name__, exc)
            return False
        self._conn = conn
        self._checked_at = time.monotonic()
        return True

    def wait(self, timeout: float) -> bool:
        if not self.listening:
            time.sleep(timeout)
            return False
        if self._conn is None:
            if self._connect():
                return True  # (re)connected: what was notified meanwhile is lost, so look now
            time.sleep(timeout)
            return True  # not listening: fall back to looking every `timeout`
        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                return True
            if time.monotonic() - self._checked_at >= _CHECK_EVERY_S:
                self._conn.execute("SELECT 1")
                self._checked_at = time.monotonic()
        except Exception as exc:  # terminated, restarted, network gone: listen again, look first
            log.warning("webhook drain: listening connection lost (%s); listening again", type(exc).__name__)
            self.close()
            return True
        return False
