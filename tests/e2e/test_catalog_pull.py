"""`flokit catalog pull`: a self-contained warehouse.duckdb from a lake in an object store or on disk."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from tests.support.cli import flokit_in_process
from tests.support.reports import seed_lake
from warehouse.analyst_views import ANALYST_VIEWS
from warehouse.catalog import publish_catalog
from warehouse.paths import DataPaths


def test_pull_from_an_object_store_writes_a_file_that_opens_anywhere(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host = tmp_path / "analyst"
    data = seed_lake(tmp_path / "worker", "ws_c", users=60, days=5, lake_url=s3_url)
    paths = DataPaths(tmp_path / "worker", s3_url)
    store = paths.object_store()
    assert store is not None
    env = {**os.environ, "FLOKIT_DATA_DIR": str(host), "FLOKIT_LAKE_URL": s3_url}
    before = flokit_in_process(env, "catalog", "pull", "--dir", str(tmp_path / "out"), "--json")
    assert before.returncode == 1
    assert "no catalog has been published" in json.loads(before.stderr)["error"]

    publish_catalog(store, paths.lake(), ANALYST_VIEWS, at=datetime.now(UTC))
    done = flokit_in_process(env, "catalog", "pull", "--dir", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["rows"]["canonical_events"] == data.events.height
    pulled = tmp_path / "out" / "warehouse.duckdb"
    monkeypatch.chdir(tmp_path)  # another working directory, and no AWS settings in the reader
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    with duckdb.connect(str(pulled), read_only=True) as con:
        assert con.sql("SELECT count(*) FROM canonical_events").fetchall() == [(data.events.height,)]
        names = {row[0] for row in con.sql("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert names == {view.name for view in ANALYST_VIEWS}


def test_an_unreachable_store_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "FLOKIT_DATA_DIR": str(tmp_path),
        "FLOKIT_LAKE_URL": "s3://flokit-nowhere/lake",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
        "AWS_ACCESS_KEY_ID": "k",
        "AWS_SECRET_ACCESS_KEY": "s",
    }
    done = flokit_in_process(env, "catalog", "pull", "--dir", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: catalog not pulled: could not read s3://flokit-nowhere/lake/catalog/catalog.json"
    )
    assert len(done.stderr.strip().splitlines()) == 1
