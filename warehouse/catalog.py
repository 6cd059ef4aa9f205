"""The analyst catalog `warehouse.duckdb`: views over the lake, rebuilt and swapped atomically.

The file is published like every DuckDB file FloKit writes (`warehouse.duckdb_files.publishing`:
built under a temp name, then `os.replace`d over the live one). Each feature declares its views
as `CatalogView`s; the `analyst_catalog` asset builds them all and shows a `preview`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from warehouse.duckdb_files import count_rows, literal, publishing, quote
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


def build_catalog(path: Path, lake: Lake, views: Iterable[CatalogView]) -> dict[str, int]:
    """Build every view into a new file and publish it atomically. Returns rows per view.

    View bodies must be literal SQL (DDL takes no bound parameters); every interpolated value
    is a lake path we built or a declared name, quoted here.
    """
    counts: dict[str, int] = {}
    with publishing(path, storage_version=STORAGE_VERSION) as con:
        for view in views:
            files = sorted(lake.dataset_dir(view.dataset).glob("**/*.parquet"))
            if files:
                body = f"SELECT * FROM read_parquet({literal(lake.glob(view.dataset))}, hive_partitioning = false)"  # noqa: S608 (quoted lake path)
            else:
                columns = ", ".join(
                    f"CAST(NULL AS {_duck_type(dtype)}) AS {quote(name)}" for name, dtype in view.schema.items()
                )
                body = f"SELECT {columns} WHERE false"
            con.execute(f"CREATE OR REPLACE VIEW {quote(view.name)} AS {body}")
            con.execute(f"COMMENT ON VIEW {quote(view.name)} IS {literal(view.description)}")
            for column, comment in view.column_comments.items():
                con.execute(f"COMMENT ON COLUMN {quote(view.name)}.{quote(column)} IS {literal(comment)}")
            counts[view.name] = count_rows(con, quote(view.name))
    return counts


def preview(path: Path, view: str, order_by: str, rows: int = 10) -> pl.DataFrame:
    """The latest `rows` of a view, read back from the published file read-only, as an analyst would."""
    with duckdb.connect(str(path), read_only=True) as con:
        query = f"SELECT * FROM {quote(view)} ORDER BY {quote(order_by)} DESC LIMIT {int(rows)}"  # noqa: S608 (declared names)
        return con.sql(query).pl()


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
