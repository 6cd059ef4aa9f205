"""The analyst catalog `warehouse.duckdb`: views over the lake, rebuilt and swapped atomically.

DuckDB allows one read-write process or many read-only ones per file, never both, so the
catalog is built under a temp name, closed, and `os.replace`d over the live name: analysts and
API workers holding the old file keep reading it undisturbed and see the new one on reopen.
Each feature declares its views as `CatalogView`s; the `analyst_catalog` asset builds them all.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from warehouse.lake import Lake

# The file format analysts' tools must read. DuckDB 2.0 writes a storage version that no 1.x
# DuckDB opens, and the DuckDB CLI on PyPI (`duckdb-cli`, installed with FloKit) is 1.5; v1.0.0
# storage opens in every DuckDB from 1.0 on. The catalog holds only views, so nothing is lost.
STORAGE_VERSION = "v1.0.0"


@dataclass(frozen=True)
class CatalogView:
    name: str
    dataset: str  # lake dataset directory, read as <lake>/<dataset>/**/*.parquet
    description: str
    schema: dict[str, pl.DataType]  # used for an empty, typed view before the first file exists
    column_comments: dict[str, str] = field(default_factory=dict)


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def count_rows(con: duckdb.DuckDBPyConnection, relation: str) -> int:
    """Rows in `relation` (an identifier we built, never input: DDL cannot bind identifiers)."""
    row = con.execute(f"SELECT count(*) FROM {relation}").fetchone()  # noqa: S608
    assert row is not None, "count(*) always answers one row"
    return int(row[0])


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def build_catalog(path: Path, lake: Lake, views: Iterable[CatalogView]) -> dict[str, int]:
    """Build every view into a new file and publish it atomically. Returns rows per view.

    View bodies must be literal SQL (DDL takes no bound parameters); every interpolated value
    is a lake path we built or a declared name, quoted here.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    counts: dict[str, int] = {}
    try:
        con = duckdb.connect()
        try:
            con.execute(f"ATTACH {_literal(str(tmp))} AS catalog (STORAGE_VERSION {_literal(STORAGE_VERSION)})")
            con.execute("USE catalog")
            for view in views:
                files = sorted(lake.dataset_dir(view.dataset).glob("**/*.parquet"))
                if files:
                    body = f"SELECT * FROM read_parquet({_literal(lake.glob(view.dataset))}, hive_partitioning = false)"  # noqa: S608 (quoted lake path)
                else:
                    columns = ", ".join(
                        f"CAST(NULL AS {_duck_type(dtype)}) AS {_quote(name)}" for name, dtype in view.schema.items()
                    )
                    body = f"SELECT {columns} WHERE false"
                con.execute(f"CREATE OR REPLACE VIEW {_quote(view.name)} AS {body}")
                con.execute(f"COMMENT ON VIEW {_quote(view.name)} IS {_literal(view.description)}")
                for column, comment in view.column_comments.items():
                    con.execute(f"COMMENT ON COLUMN {_quote(view.name)}.{_quote(column)} IS {_literal(comment)}")
                counts[view.name] = count_rows(con, _quote(view.name))
            con.execute("USE memory")
            con.execute("DETACH catalog")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return counts


def _duck_type(dtype: pl.DataType) -> str:
    if dtype == pl.String:
        return "VARCHAR"
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ" if dtype.time_zone else "TIMESTAMP"
    mapping = {pl.Int64: "BIGINT", pl.Int32: "INTEGER", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN", pl.Date: "DATE"}
    for polars_type, duck in mapping.items():
        if dtype == polars_type:
            return duck
    raise ValueError(f"no DuckDB type for {dtype}")
