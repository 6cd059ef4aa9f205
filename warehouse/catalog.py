"""The analyst catalog `warehouse.duckdb`: views over the lake, rebuilt and swapped atomically.

The file is published like every DuckDB file FloKit writes (`warehouse.duckdb_files.publishing`:
built under a temp name, then `os.replace`d over the live one). Each feature declares its views
as `CatalogView`s; the `analyst_catalog` asset builds them all and shows a `preview`.

With the lake in an object store, DuckDB could not read it (its httpfs extension cannot be
installed offline for DuckDB 2: design/scale-out.md §0.7), so the asset publishes the catalog's
description instead (`catalog/catalog.json`: each view's name, dataset, comments and schema), and
`flokit catalog pull --dir D` builds `D/warehouse.duckdb` from it: the same names, comments and
rows, as tables read from the lake's current partitions, so the file opens anywhere with no
AWS settings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from warehouse.duckdb_files import count_rows, literal, publishing, quote
from warehouse.lake import Lake, LocalLake
from warehouse.objects import ObjectStore, StoreUnavailable
from warehouse.paths import PUBLISHED_CATALOG

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


def build_catalog(path: Path, lake: LocalLake, views: Iterable[CatalogView]) -> dict[str, int]:
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


def view_frame(lake: Lake, view: CatalogView) -> pl.LazyFrame:
    """Every row of a view's dataset (its daily partitions and its whole-table file), read from the lake."""
    files = list(lake.days(view.dataset).values())
    table = lake.table(view.dataset)
    return lake.scan([*files, *([table] if table else [])], view.schema)


def publish_catalog(store: ObjectStore, lake: Lake, views: Iterable[CatalogView], *, at: datetime) -> dict[str, int]:
    """Publish the catalog's description next to the lake (one PUT: readers get the old or the
    new one). Returns rows per view, counted from the partitions' footers."""
    listed = list(views)
    counts = {view.name: int(view_frame(lake, view).select(pl.len()).collect().item()) for view in listed}
    doc = {
        "published_at": at.isoformat(),
        "views": [
            {
                "name": view.name,
                "dataset": view.dataset,
                "description": view.description,
                "column_comments": view.column_comments,
                "columns": {name: _duck_type(dtype) for name, dtype in view.schema.items()},
            }
            for view in listed
        ],
    }
    store.put(PUBLISHED_CATALOG, json.dumps(doc, indent=1).encode())
    return counts


def published_views(store: ObjectStore) -> list[CatalogView]:
    """The views of the catalog last published next to the lake."""
    blob = store.get(PUBLISHED_CATALOG)
    if blob is None:
        raise StoreUnavailable(
            f"no catalog has been published at {store.url(PUBLISHED_CATALOG)} yet: run `flokit refresh` first"
        )
    return [_published_view(entry) for entry in json.loads(blob.data)["views"]]


def pull_catalog(lake: Lake, views: Iterable[CatalogView], destination: Path) -> dict[str, int]:
    """Build `destination` (a `warehouse.duckdb`) that needs nothing but itself: one table per
    view, with its comments, holding the rows of the lake's current partitions. Returns rows per view."""
    counts: dict[str, int] = {}
    with publishing(destination, storage_version=STORAGE_VERSION) as con:
        for view in views:
            con.register("frame", view_frame(lake, view).collect().to_arrow())
            con.sql(f"CREATE TABLE {quote(view.name)} AS SELECT * FROM frame")  # noqa: S608 (declared name)
            con.unregister("frame")
            con.execute(f"COMMENT ON TABLE {quote(view.name)} IS {literal(view.description)}")
            for column, comment in view.column_comments.items():
                con.execute(f"COMMENT ON COLUMN {quote(view.name)}.{quote(column)} IS {literal(comment)}")
            counts[view.name] = count_rows(con, quote(view.name))
    return counts


def _published_view(entry: dict[str, Any]) -> CatalogView:
    schema = {name: _polars_type(duck) for name, duck in entry["columns"].items()}
    return CatalogView(entry["name"], entry["dataset"], entry["description"], schema, entry["column_comments"])


def preview_lake(lake: Lake, view: CatalogView, order_by: str, rows: int = 10) -> pl.DataFrame:
    """The latest `rows` of a view, read from the lake (the catalog in an object store is not a file)."""
    return view_frame(lake, view).sort(order_by, descending=True).head(rows).collect()


def preview(path: Path, view: str, order_by: str, rows: int = 10) -> pl.DataFrame:
    """The latest `rows` of a view, read back from the published file read-only, as an analyst would."""
    with duckdb.connect(str(path), read_only=True) as con:
        query = f"SELECT * FROM {quote(view)} ORDER BY {quote(order_by)} DESC LIMIT {int(rows)}"  # noqa: S608 (declared names)
        return con.sql(query).pl()


_DUCK_TO_POLARS: dict[str, pl.DataType] = {
    "VARCHAR": pl.String(),
    "TIMESTAMPTZ": pl.Datetime("us", "UTC"),
    "TIMESTAMP": pl.Datetime("us"),
    "BIGINT": pl.Int64(),
    "INTEGER": pl.Int32(),
    "DOUBLE": pl.Float64(),
    "BOOLEAN": pl.Boolean(),
    "DATE": pl.Date(),
}


def _polars_type(duck: str) -> pl.DataType:
    try:
        return _DUCK_TO_POLARS[duck]
    except KeyError:
        raise ValueError(f"the published catalog names a column type FloKit does not read: {duck}") from None


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
