"""The PostgreSQL side of the Dagster instance: its schema, reachability, and the daemon's lock.

Dagster's storages stamp their Alembic revision in an `alembic_version` table, as FloKit's own
migrations do; on FloKit's PostgreSQL database the instance therefore lives in a schema of its
own (`search_path` in the URL, warehouse/settings.py), which has to exist before Dagster
creates its tables there.

"One daemon per deployment" is Dagster's rule, which it does not enforce (its heartbeats tell a
second daemon only after 30 minutes): `DaemonLock` holds a session-level advisory lock on a
connection for the daemon role's whole life, and a second daemon finds it taken.

Dagster creates its PostgreSQL tables and stamps `alembic_version` as a process opens the
instance, unguarded; hosts of one deployment starting at once on a new database raced there (one
of about 70 starts died on a duplicate in PostgreSQL's catalog). `preparing` holds an advisory
lock of the deployment while a host opens and migrates the instance, so hosts take turns.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from warehouse.db import PG_CONNECT_TIMEOUT_S

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# pg_try_advisory_lock's key for "the Dagster daemon of this deployment" (any fixed bigint; this
# one spells "flokitdm" in ASCII, so it is recognisable in pg_locks).
DAEMON_LOCK_KEY = 0x666C6F6B6974646D
# pg_advisory_lock's key for "a host is opening or migrating the instance" ("flokitin").
PREPARE_LOCK_KEY = 0x666C6F6B6974696E


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url, poolclass=NullPool, connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S})


def search_path_schema(url: str) -> str | None:
    """The schema the URL's `options=-csearch_path=...` puts first, or None."""
    options = sa.engine.make_url(url).query.get("options")
    for option in [options] if isinstance(options, str) else list(options or ()):
        match = re.search(r"-c\s*search_path=([^,\s]+)", unquote(option))
        if match:
            return match.group(1)
    return None


def ensure_schema(url: str) -> str | None:
    """Create the schema the instance URL names (when it names one); returns it."""
    schema = search_path_schema(url)
    if schema is None:
        return None
    if not _SCHEMA.match(schema):
        raise ValueError(f"the Dagster schema {schema!r} is not a plain lower-case PostgreSQL name")
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            # Two processes preparing at once: IF NOT EXISTS can still race on the catalog's unique
            # index; the advisory lock makes the second wait and then find the schema.
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:s))"), {"s": f"flokit-schema-{schema}"})
            conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        engine.dispose()
    return schema


def reachable(url: str) -> str | None:
    """None when a connection opens and answers, else the reason in one line."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except sa.exc.SQLAlchemyError as exc:
        return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or ["unreachable"])[0]
    finally:
        engine.dispose()
    return None


@contextmanager
def preparing(url: str) -> Iterator[None]:
    """Hold the deployment's preparation lock (waiting for it) for the body's duration."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": PREPARE_LOCK_KEY})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": PREPARE_LOCK_KEY})
                conn.commit()
    finally:
        engine.dispose()


class DaemonLock:
    """The deployment's one-daemon lock, held while this object's connection lives."""

    def __init__(self, url: str) -> None:
        self._engine = _engine(url)
        self._conn: sa.Connection | None = None

    def acquire(self) -> bool:
        """True when this process now holds the lock; False when another session does."""
        conn = self._engine.connect()
        held = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": DAEMON_LOCK_KEY}).scalar_one()
        conn.commit()
        if not held:
            conn.close()
            return False
        self._conn = conn
        return True

    def alive(self) -> bool:
        """Whether the session holding the lock still answers (a restarted server drops the lock)."""
        if self._conn is None:
            return False
        try:
            self._conn.exec_driver_sql("SELECT 1")
            self._conn.commit()
        except sa.exc.SQLAlchemyError:
            return False
        return True

    def release(self) -> None:
        if self._conn is not None:
            self._conn.close()  # ending the session releases the lock
            self._conn = None
        self._engine.dispose()
