"""The catalog file is built atomically and readable by a read-only DuckDB connection."""

from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from warehouse.catalog import CatalogView, build_catalog
from warehouse.lake import LocalLake

VIEW = CatalogView(
    name="canonical_events",
    dataset="canonical_events",
    description="Every accepted event.",
    schema=CANONICAL_EVENT_SCHEMA,
    column_comments={"event_id": "Stable id; unique per workspace."},
)


def test_empty_lake_gives_typed_empty_views(tmp_path: Path) -> None:
    path = tmp_path / "warehouse.duckdb"
    assert build_catalog(path, LocalLake(tmp_path / "lake"), [VIEW]) == {"canonical_events": 0}
    with duckdb.connect(str(path), read_only=True) as con:
        columns = [r[0] for r in con.execute("DESCRIBE canonical_events").fetchall()]
    assert columns == list(CANONICAL_EVENT_SCHEMA)


def test_views_read_the_lake_and_carry_comments(tmp_path: Path) -> None:
    lake = LocalLake(tmp_path / "lake")
    row = {name: None for name in CANONICAL_EVENT_SCHEMA} | {
        "event_id": "e1",
        "workspace_id": "ws",
        "event_type": "install",
        "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
        "received_at": datetime(2026, 1, 1, tzinfo=UTC),
        "properties": "{}",
        "source": "test",
    }
    lake.write(
        pl.DataFrame([row], schema=CANONICAL_EVENT_SCHEMA), lake.partition_path("canonical_events", date(2026, 1, 1))
    )
    path = tmp_path / "warehouse.duckdb"
    reader_before = None
    build_catalog(path, lake, [VIEW])
    reader_before = duckdb.connect(str(path), read_only=True)
    assert build_catalog(path, lake, [VIEW]) == {"canonical_events": 1}  # rebuilt while a reader holds the old file
    assert reader_before.execute("SELECT event_id FROM canonical_events").fetchall() == [("e1",)]
    reader_before.close()
    with duckdb.connect(str(path), read_only=True) as con:
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'canonical_events' AND column_name = 'event_id'"
        ).fetchone()[0]
    assert comment == "Stable id; unique per workspace."
    assert not list(tmp_path.glob(".warehouse.duckdb.*"))
