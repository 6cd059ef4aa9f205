"""The one publisher of DuckDB files: a build that raises leaves the live file as it was."""

from pathlib import Path

import duckdb
import pytest

from warehouse.duckdb_files import count_rows, publishing


def test_a_publish_replaces_the_file_and_a_failed_one_leaves_it(tmp_path: Path) -> None:
    path = tmp_path / "out" / "published.duckdb"
    with publishing(path) as con:
        con.sql("CREATE TABLE t AS SELECT 1 AS a")
        assert count_rows(con, "t") == 1

    def failing_build() -> None:
        with publishing(path) as con:
            con.sql("CREATE TABLE t AS SELECT 2 AS a UNION ALL SELECT 3")
            raise RuntimeError("the build failed half-way")

    with pytest.raises(RuntimeError):
        failing_build()
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT a FROM t").fetchall() == [(1,)]
    assert [p.name for p in path.parent.iterdir()] == ["published.duckdb"]  # no temp file left behind


def test_a_storage_version_is_pinned_for_older_readers(tmp_path: Path) -> None:
    path = tmp_path / "views.duckdb"
    with publishing(path, storage_version="v1.0.0") as con:
        con.sql("CREATE VIEW v AS SELECT 1 AS a")
    with duckdb.connect(str(path), read_only=True) as con:
        ((tags,),) = con.execute("SELECT tags FROM duckdb_databases() WHERE database_name = 'views'").fetchall()
    assert tags["storage_version"].startswith("v1.0.0")
