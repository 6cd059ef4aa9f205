"""The lake's contract, on local disk and in a real object store (SeaweedFS): whole-partition
replaces, stamps that order writes, stale marks, and read-modify-writes that lose no rows."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.support.objects import bucket_keys
from transforms.reports.schemas import SPEND_SCHEMA
from warehouse.catalog import CatalogView, publish_catalog, published_views, pull_catalog
from warehouse.lake import Lake, LocalLake
from warehouse.lake_cache import LakeCache
from warehouse.object_lake import ObjectLake
from warehouse.objects import ObjectStore, StoreUnavailable
from warehouse.paths import DataPaths
from warehouse.reports import report_lake

DAYS = [date(2026, 4, 1) + timedelta(days=k) for k in range(3)]
SCHEMA = {"workspace_id": pl.String(), "n": pl.Int64()}


def frame(workspace: str, *values: int) -> pl.DataFrame:
    return pl.DataFrame({"workspace_id": [workspace] * len(values), "n": list(values)}, schema=SCHEMA)


def spend(workspace: str, day: date, amount: float) -> pl.DataFrame:
    row = {
        "workspace_id": workspace,
        "spend_date": day,
        "campaign": "c1",
        "creative": "cr",
        "country": "US",
        "spend": amount,
        "amount": amount,
        "currency": "USD",
        "money_issue": None,
    }
    return pl.DataFrame([row], schema=SPEND_SCHEMA)


def test_a_rewrite_replaces_the_partition_whole_and_stamps_it_later(any_lake: Lake) -> None:
    any_lake.write_days("ds", {DAYS[0]: frame("a", 1, 2), DAYS[1]: frame("a", 3)})
    first = any_lake.days("ds")
    assert list(first) == DAYS[:2]
    any_lake.write_day("ds", DAYS[0], frame("a", 9))
    second = any_lake.days("ds")
    assert second[DAYS[0]].stamp > first[DAYS[0]].stamp
    assert second[DAYS[1]] == first[DAYS[1]]  # untouched
    rows = any_lake.scan(second.values(), SCHEMA).collect().sort("n")
    assert rows["n"].to_list() == [3, 9]  # replaced, not appended
    assert any_lake.columns(second[DAYS[0]]) == ("workspace_id", "n")


def test_a_stale_mark_keeps_the_rows_and_makes_the_day_older_than_any_input(any_lake: Lake) -> None:
    any_lake.write_days("ds", {DAYS[0]: frame("a", 1), DAYS[1]: frame("a", 2)})
    any_lake.mark_stale("ds", [DAYS[1], DAYS[2]])  # a day without a partition is ignored
    days = any_lake.days("ds")
    assert days[DAYS[1]].stamp == 0 and days[DAYS[0]].stamp > 0 and DAYS[2] not in days
    assert any_lake.scan([days[DAYS[1]]], SCHEMA).collect()["n"].to_list() == [2]


def test_the_whole_table_file(any_lake: Lake) -> None:
    assert any_lake.table("t") is None
    assert report_lake.table_rows(any_lake, report_lake.LTV) is None
    written = any_lake.write_table("t", frame("a", 1, 2, 3))
    assert any_lake.table("t") == written
    assert any_lake.read_bytes(written)[:4] == b"PAR1"
    assert any_lake.scan([written], SCHEMA).collect().height == 3


def _second_host(lake: Lake, tmp_path: Path) -> Lake:
    """Another process's view of the same lake (its own caches, its own lock file handle)."""
    if isinstance(lake, ObjectLake):
        store = ObjectStore(str(lake.store))
        return ObjectLake(store, cache=LakeCache(store, tmp_path / "cache-2") if lake.cache else None)
    assert isinstance(lake, LocalLake)
    return LocalLake(lake.root)


def test_two_writers_of_one_day_lose_no_rows(any_lake: Lake, tmp_path: Path) -> None:
    """Two workspaces' syncs replace their spend of the same days at once: each keeps the other's rows."""
    other = _second_host(any_lake, tmp_path)
    errors: list[BaseException] = []

    def sync(lake: Lake, workspace: str, amount: float) -> None:
        try:
            for round_ in range(4):
                rows = pl.concat([spend(workspace, day, amount + round_) for day in DAYS])
                report_lake.replace_spend_days(lake, workspace, DAYS, rows)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=sync, args=(any_lake, "ws_a", 10.0)),
        threading.Thread(target=sync, args=(other, "ws_b", 20.0)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = report_lake.scan_days(any_lake, report_lake.SPEND_RAW).collect()
    assert sorted(rows.select("workspace_id", "spend_date", "spend").rows()) == sorted(
        [("ws_a", day, 13.0) for day in DAYS] + [("ws_b", day, 23.0) for day in DAYS]
    )


def test_writers_of_different_days_of_one_dataset_keep_each_others_days(any_lake: Lake, tmp_path: Path) -> None:
    other = _second_host(any_lake, tmp_path)
    days = [DAYS[0] + timedelta(days=k) for k in range(8)]
    threads = [
        threading.Thread(target=lambda: [any_lake.write_day("ds", d, frame("a", i)) for i, d in enumerate(days[::2])]),
        threading.Thread(target=lambda: [other.write_day("ds", d, frame("b", i)) for i, d in enumerate(days[1::2])]),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(any_lake.days("ds")) == days
    assert list(other.days("ds")) == days


def test_a_write_after_another_hosts_write_gets_a_later_stamp(any_lake: Lake, tmp_path: Path) -> None:
    other = _second_host(any_lake, tmp_path)
    any_lake.write_day("input", DAYS[0], frame("a", 1))
    other.write_day("derived", DAYS[0], frame("a", 1))
    any_lake.write_day("input", DAYS[0], frame("a", 2))  # a late event, after the derived day
    assert other.days("input")[DAYS[0]].stamp > other.days("derived")[DAYS[0]].stamp


def test_objects_are_written_under_new_keys_and_replaced_ones_are_deleted_later(s3_url: str) -> None:
    lake = ObjectLake(ObjectStore(s3_url), retain_ns=0)
    lake.write_day("ds", DAYS[0], frame("a", 1))
    first = bucket_keys(s3_url)
    assert first == [
        "_clock.json",
        "ds/_manifest.json",
        *[k for k in first if k.startswith("ds/date=2026-04-01/v=") and k.endswith("/part.parquet")],
    ]
    lake.write_day("ds", DAYS[0], frame("a", 2))  # the first file is retired (kept for readers) ...
    assert len([k for k in bucket_keys(s3_url) if k.endswith(".parquet")]) == 2
    lake.write_day("ds", DAYS[1], frame("a", 3))  # ... and deleted by a commit after its retention
    parquet = [k for k in bucket_keys(s3_url) if k.endswith(".parquet")]
    assert len(parquet) == 2 and all(
        lake.store.url(k) in {p.location for p in lake.days("ds").values()} for k in parquet
    )


def test_an_unreachable_store_is_one_readable_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard: nothing listens
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    lake = DataPaths(tmp_path, "s3://nowhere/lake").lake()
    with pytest.raises(StoreUnavailable, match=r"could not read s3://nowhere/lake/ds/_manifest.json"):
        lake.days("ds")


def test_a_pulled_catalog_opens_anywhere_with_the_views_rows_and_comments(
    s3_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ObjectStore(s3_url)
    lake = ObjectLake(store)
    view = CatalogView("numbers", "ds", "Numbers by workspace.", SCHEMA, {"n": "A number."})
    lake.write_days("ds", {DAYS[0]: frame("a", 1, 2), DAYS[1]: frame("b", 3)})
    assert publish_catalog(store, lake, [view], at=datetime.now(UTC)) == {"numbers": 3}
    counts = pull_catalog(lake, published_views(store), tmp_path / "pulled" / "warehouse.duckdb")
    assert counts == {"numbers": 3}
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    with duckdb.connect(str(tmp_path / "pulled" / "warehouse.duckdb"), read_only=True) as con:
        got = con.sql("SELECT * FROM numbers ORDER BY n").pl()
        comments = con.sql(
            "SELECT comment FROM duckdb_tables() WHERE table_name = 'numbers' UNION ALL "
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'numbers' AND column_name = 'n'"
        ).fetchall()
    assert_frame_equal(got, pl.concat([frame("a", 1, 2), frame("b", 3)]))
    assert comments == [("Numbers by workspace.",), ("A number.",)]


def test_a_host_cache_fetches_each_file_once_and_evicts_the_least_recently_used(s3_url: str, tmp_path: Path) -> None:
    store = ObjectStore(s3_url)
    ObjectLake(store).write_days("ds", {day: frame("a", i) for i, day in enumerate(DAYS)})  # another host wrote them
    cache = LakeCache(store, tmp_path / "cache", max_bytes=1)
    reader = ObjectLake(store, cache=cache)
    partitions = list(reader.days("ds").values())
    assert reader.scan(partitions, SCHEMA).collect()["n"].sort().to_list() == [0, 1, 2]
    cached = sorted((tmp_path / "cache").rglob("*.parquet"))
    assert len(cached) == 3
    assert cache.evict() == 0  # over its size, but every file was used in the last ten minutes
    an_hour_ago = time.time() - 3600
    for path in cached[:2]:
        os.utime(path, (an_hour_ago, an_hour_ago))
    assert cache.evict() > 0
    assert sorted((tmp_path / "cache").rglob("*.parquet")) == cached[2:]
    assert reader.scan(partitions, SCHEMA).collect().height == 3  # fetched again
