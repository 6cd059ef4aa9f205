"""The DuckDB files FloKit publishes (`warehouse.duckdb`, `reports.duckdb`): one way to build one.

DuckDB allows one read-write process or many read-only ones per file, never both, so a file is
built under a temp name in the same directory, closed, and `os.replace`d over the live name:
analysts and API workers holding the old file keep reading it undisturbed and see the new one
on reopen, and a build that fails leaves the live file as it was.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

ALIAS = "published"  # the catalog name of the file being built, inside `publishing`


def quote(identifier: str) -> str:
    """An SQL identifier (DDL cannot bind identifiers; every one we build is a declared name)."""
    return '"' + identifier.replace('"', '""') + '"'


def literal(text: str) -> str:
    """An SQL string literal (ATTACH, COMMENT and view bodies take no bound parameters)."""
    return "'" + text.replace("'", "''") + "'"


def count_rows(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    """Rows in `relation` (an identifier we built, never input)."""
    # fetchall drains the result: DuckDB 2 refuses the connection's next `register` while one is open.
    ((count,),) = con.execute(f"SELECT count(*) FROM {relation}").fetchall()  # noqa: S608
    return int(count)


@contextmanager
def publishing(path: Path, *, storage_version: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection whose default catalog is a new, empty file that replaces `path` atomically
    when the block ends without an exception (and is deleted when it raises).

    `storage_version` pins the file format for readers on older DuckDB releases (None: this
    DuckDB's default)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    options = f" (STORAGE_VERSION {literal(storage_version)})" if storage_version else ""
    try:
        con = duckdb.connect()
        try:
            # `sql` runs a statement to completion; an `execute` result left open would block the
            # caller's next `register` (DuckDB 2).
            con.sql(f"ATTACH {literal(str(tmp))} AS {ALIAS}{options}")
            con.sql(f"USE {ALIAS}")
            yield con
            con.sql("USE memory")
            con.sql(f"DETACH {ALIAS}")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
