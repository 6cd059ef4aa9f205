"""Is the operational database unavailable, as opposed to our code being wrong?

An outage (PostgreSQL stopped, restarting or out of connections; a SQLite file locked past the
busy timeout, on a failing or full disk, or gone) is not a bug: the request was fine and will
succeed once the database is back, so the API answers 503 with Retry-After and logs one line,
not a 500 with a traceback per request. Everything else (a missing table, a unique violation,
a bad parameter) is a bug and must stay loud. This module is the one place that tells them
apart, from the driver's own error codes, never from message text.

`probe` is the readiness check behind `GET /readyz`: one cheap statement with short timeouts,
on an engine of its own so that a hung connect can never hold a request worker for long.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from urllib.parse import quote

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.pool import NullPool

# PostgreSQL SQLSTATEs that mean "the server cannot serve you right now".
_PG_SHUTDOWN = {"57P01": "shutdown", "57P02": "shutdown", "57P03": "starting_or_stopping"}
_PG_CLASSES = {"08": "connection", "53": "resources"}  # connection exception; insufficient resources
_PG_IO_ERROR = "58030"
# SQLite primary result codes (the low byte of an extended code).
_SQLITE = {5: "locked", 10: "io_error", 13: "disk_full", 14: "cannot_open"}  # BUSY, IOERR, FULL, CANTOPEN

# The readiness probe gives up after this many seconds (connect, then statement).
PROBE_TIMEOUT_S = 2


@dataclass(frozen=True)
class Unavailable:
    """Why the database cannot serve: `kind` groups log lines, `detail` is the driver's first line."""

    kind: str
    detail: str


def unavailable(exc: BaseException) -> Unavailable | None:
    """The outage `exc` reports, or None when it is not one (then it is a bug: answer 500).

    Looks at SQLAlchemy's wrapper and the driver error inside it, and down the `__cause__`
    chain, since the raw driver path (`warehouse/driver.py`) raises unwrapped driver errors.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _classify(current)
        if found is not None:
            return Unavailable(found, _first_line(current))
        current = current.orig if isinstance(current, sa.exc.DBAPIError) else current.__cause__
    return None


def _classify(exc: BaseException) -> str | None:
    if isinstance(exc, sa.exc.TimeoutError):  # no pooled connection came free in time
        return "pool_exhausted"
    if isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated:
        return "connection"  # the dialect recognised a disconnect
    if isinstance(exc, psycopg.Error):
        return _classify_postgres(exc)
    if isinstance(exc, sqlite3.Error):
        return _SQLITE.get((getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF)
    return None


def _classify_postgres(exc: psycopg.Error) -> str | None:
    state = exc.sqlstate
    if state is None:
        # libpq failed below SQL: connection refused or reset, server gone, connect timeout.
        # psycopg raises these as OperationalError without a SQLSTATE.
        return "connection" if isinstance(exc, psycopg.OperationalError) else None
    if state in _PG_SHUTDOWN:
        return _PG_SHUTDOWN[state]
    if state == _PG_IO_ERROR:
        return "io_error"
    return _PG_CLASSES.get(state[:2])


def _first_line(exc: BaseException) -> str:
    inner = exc.orig if isinstance(exc, sa.exc.DBAPIError) and exc.orig is not None else exc
    text = str(inner).strip().splitlines()
    return (text[0] if text else type(inner).__name__)[:200]


class _ProbeEngines:
    """One engine per database URL for the readiness probe. Without a pool: every probe opens
    a new connection, which is what must work after an outage (a kept connection would hide a
    server that accepts no new clients, or a SQLite file that went away), costs a few
    milliseconds every few seconds, and leaves nothing behind for a forked worker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[str, Engine] = {}

    def get(self, url: str) -> Engine:
        with self._lock:
            engine = self._engines.get(url)
            if engine is None:
                engine = self._engines[url] = _probe_engine(url)
            return engine


def _probe_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        target = "file:" + quote(url.removeprefix("sqlite:///")) + "?mode=rw"

        def connect() -> sqlite3.Connection:
            # Read-write but never create: a missing file is an outage, not an empty database.
            return sqlite3.connect(target, uri=True, timeout=PROBE_TIMEOUT_S, check_same_thread=False)

        return sa.create_engine("sqlite://", creator=connect, poolclass=NullPool)
    timeout_ms = PROBE_TIMEOUT_S * 1000
    return sa.create_engine(
        url,
        poolclass=NullPool,
        connect_args={"connect_timeout": PROBE_TIMEOUT_S, "options": f"-c statement_timeout={timeout_ms}"},
    )


_probes = _ProbeEngines()


def probe(url: str) -> Unavailable | None:
    """None if the database answers a read within about 2 x PROBE_TIMEOUT_S, else why not.

    SQLite reads the schema table (so the file must open and be a database); PostgreSQL runs
    `SELECT 1`. Any failure counts as not ready, classified or not: a readiness check that
    raised would be a 500, and a load balancer needs a plain yes or no.
    """
    try:
        with _probes.get(url).connect() as conn:
            statement = "SELECT count(*) FROM sqlite_master" if url.startswith("sqlite") else "SELECT 1"
            conn.exec_driver_sql(statement).scalar()
    except Exception as exc:  # every failure is "not ready"; the kind says which
        return unavailable(exc) or Unavailable("error", _first_line(exc))
    return None
