"""Report storage: the bulk lake path matches landing, stale days, and the published store's reader."""

import os
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import polars as pl
import pytest

from transforms.demo import DemoConfig, generate
from warehouse.db import Database
from warehouse.events import landing
from warehouse.lake import Lake, LocalLake
from warehouse.paths import DataPaths
from warehouse.reports import demo, report_lake, serving


def test_bulk_partitions_are_byte_identical_to_landed_ones(db: Database, tmp_path: Path) -> None:
    data = generate(DemoConfig("ws_bytes", users=60, days=3, seed=2, start=date(2026, 4, 1)))
    assert demo.land_frame(db, data.events, batch=50) == (data.events.height, 0)
    landed, direct = LocalLake(tmp_path / "landed"), LocalLake(tmp_path / "direct")
    days = demo.write_event_partitions(direct, data.events)
    for day in days:
        with db.read() as conn:
            frame, _ = landing.day_frame(conn, day)
        landed.write(frame, landed.partition_path(report_lake.CANONICAL_EVENTS, day))
        a = landed.partition_path(report_lake.CANONICAL_EVENTS, day).read_bytes()
        assert a == direct.partition_path(report_lake.CANONICAL_EVENTS, day).read_bytes(), day


def test_seeding_twice_lands_nothing_new(db: Database, tmp_path: Path) -> None:
    config = DemoConfig("ws_twice", users=40, days=5, seed=4, start=date(2026, 4, 1))
    lake = LocalLake(tmp_path / "lake")
    first = demo.seed(db, lake, config)
    again = demo.seed(db, lake, config)
    assert first.written == first.events and first.duplicate == 0
    assert again.written == 0 and again.duplicate == first.events
    spend = report_lake.scan_days(lake, report_lake.SPEND_RAW).collect()
    assert spend.height == 2 * first.spend_rows  # the same delivery twice; cleaning keeps one per key


def test_stale_days_are_the_days_whose_input_changed(any_lake: Lake) -> None:
    lake = any_lake
    data = generate(DemoConfig("ws_s", users=50, days=3, seed=1, start=date(2026, 4, 1)))
    demo.write_event_partitions(lake, data.events)
    assert report_lake.stale_days(lake) == [date(2026, 4, 1), date(2026, 4, 2), date(2026, 4, 3)]
    days = report_lake.stale_days(lake)
    for derived in report_lake.DERIVED_FROM:  # in dependency order, as a refresh writes them
        for day in days:
            report_lake.write_day(lake, derived, day, pl.DataFrame(schema=report_lake.SCHEMAS[derived]))
    assert report_lake.stale_days(lake) == []
    day2 = data.events.filter(pl.col("occurred_at").dt.date() == date(2026, 4, 2))
    demo.write_event_partitions(lake, day2)
    # Day 2 itself, day 3 whose weekly activity looks back at day 2, and day 1 whose cohort's
    # action signals read its first 30 days.
    assert report_lake.stale_days(lake) == [date(2026, 4, 1), date(2026, 4, 2), date(2026, 4, 3)]
    assert report_lake.stale_by_dataset(lake)[report_lake.ACTION_SIGNALS] == [date(2026, 4, 1), date(2026, 4, 2)]
    assert report_lake.stale_by_dataset(lake)[report_lake.PAYBACK_DAILY] == [date(2026, 4, 2)]


def test_write_days_splits_a_batch_by_day_and_refuses_rows_of_other_days(any_lake: Lake) -> None:
    lake = any_lake
    days = [date(2026, 4, 1), date(2026, 4, 2), date(2026, 4, 3)]
    spend = pl.DataFrame(
        {
            "workspace_id": ["ws_w"] * 3,
            "spend_date": [days[0], days[2], days[2]],
            "campaign": ["a", "a", "b"],
            "creative": ["c"] * 3,
            "country": ["US"] * 3,
            "spend": [1.0, 2.0, 3.0],
            "amount": [1.0, 2.0, 3.0],
            "currency": ["USD"] * 3,
            "money_issue": [None] * 3,
        }
    ).cast(report_lake.SCHEMAS[report_lake.SPEND])  # type: ignore[arg-type]
    written = report_lake.write_days(lake, report_lake.SPEND, days, spend, pl.col("spend_date"))
    assert written == {days[0]: 1, days[1]: 0, days[2]: 2}
    assert (
        report_lake.scan_days(lake, report_lake.SPEND, [days[1]]).collect().is_empty()
    )  # a day without rows is written empty
    assert report_lake.scan_days(lake, report_lake.SPEND, [days[2]]).collect()["spend"].sort().to_list() == [2.0, 3.0]
    before = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.SPEND).items()}
    stray = spend.with_columns(pl.lit(date(2026, 4, 9)).alias("spend_date"))
    with pytest.raises(ValueError, match="2026-04-09"):
        report_lake.write_days(lake, report_lake.SPEND, days, pl.concat([spend, stray]), pl.col("spend_date"))
    assert {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.SPEND).items()} == before


def test_reader_reopens_when_the_store_is_replaced(tmp_path: Path) -> None:
    lake = LocalLake(tmp_path / "lake")
    path = DataPaths(tmp_path).reports
    reader = serving.ReportReader(path)
    assert reader.cursor() is None and serving.meta(reader.cursor()).generated_at is None
    first = datetime(2026, 4, 1, 6, tzinfo=UTC)
    serving.publish(path, lake, generated_at=first, as_of=date(2026, 3, 31))
    assert serving.meta(reader.cursor()).generated_at == first
    inode = os.stat(path).st_ino
    second = datetime(2026, 4, 1, 12, tzinfo=UTC)
    serving.publish(path, lake, generated_at=second, as_of=date(2026, 3, 31))
    assert os.stat(path).st_ino != inode
    assert serving.meta(reader.cursor()).generated_at == second
    with duckdb.connect(str(path), read_only=True) as con:  # analysts can open it beside the API
        assert con.execute("SELECT count(*) FROM payback").fetchone() == (0,)
