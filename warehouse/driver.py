"""Hot-path statements compiled once by SQLAlchemy and run on the DBAPI cursor of a transaction.

SQLAlchemy's per-execution bookkeeping (cache key, execution context, result object, events)
was the largest part of an ingest callback after the database itself (docs/benchmarks.md).
A `DriverStatement` keeps what matters of SQLAlchemy: the SQL is compiled from
our table definitions for the connection's dialect, and every parameter goes through the
column type's own bind processor (UTC datetimes, JSON). Results come back as plain DBAPI tuples
without result processing, so use it only for statements whose result columns need none
(strings, ids), and only where the cost matters: the rest of the code uses SQLAlchemy normally.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection, Dialect


@dataclass(frozen=True)
class DriverStatement:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Callable[[Any], Any] | None, ...]
    positional: bool
    defaults: dict[str, Any]  # values of literal bind parameters (e.g. `sa.literal("x")`)

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        positional = compiled.positiontup is not None
        names = tuple(compiled.positiontup) if positional else tuple(compiled.binds)
        processors = tuple(compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
        defaults = {name: bind.value for name, bind in compiled.binds.items() if not bind.required}
        return cls(compiled.string, names, processors, positional, defaults)

    def execute(self, conn: Connection, values: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run inside the caller's transaction (same DBAPI connection); rows if the statement returns any."""
        if self.defaults:
            values = {**self.defaults, **values}
        converted = [p(values[n]) if p else values[n] for n, p in zip(self.names, self.processors, strict=True)]
        params: Any = tuple(converted) if self.positional else dict(zip(self.names, converted, strict=True))
        # Both drivers' `Connection.execute` opens a cursor, executes and returns it.
        cursor = conn.connection.driver_connection.execute(self.sql, params)  # type: ignore[union-attr]
        try:
            return cursor.fetchall() if cursor.description else []
        finally:
            cursor.close()


_CACHE: dict[tuple[str, str], DriverStatement] = {}


def driver_statement(conn: Connection, name: str, build: Callable[[], Any]) -> DriverStatement:
    """The statement `name` compiled for this connection's dialect (once per process)."""
    key = (conn.dialect.name, name)
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = DriverStatement.compile(build(), conn.dialect)
    return found
