"""Report assets materialize for real on temp dirs; a refresh touches only changed days."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from orchestration.definitions import build_definitions
from orchestration.partitions import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG, STALE_DAYS_ONLY_TAG
from orchestration.reports.assets import ASSETS, acquisitions, payback
from orchestration.reports.jobs import REFRESH_CRON, reports_schedule
from orchestration.reports.sensors import reports_sensor
from orchestration.resources import DatabaseResource, DataDirResource
from tests.support.money import reports_database
from tests.support.reports import START, refresh, seed_lake
from transforms.reports import quality
from transforms.reports.schemas import PAYBACK_KEY
from warehouse.catalog import build_catalog
from warehouse.db import Database
from warehouse.events.tables import landed_events
from warehouse.lake import LocalLake
from warehouse.reports import demo, report_lake
from warehouse.reports.catalog_views import REPORT_VIEWS
from warehouse.reports.demo import land_frame
from warehouse.settings import Settings

README_QUERY = """
SELECT value AS campaign, sum(spend) AS spend, sum(installs) AS installs,
       sum(revenue - refunds) FILTER (WHERE day < 30) / nullif(sum(spend), 0) AS roas_30d
FROM payback
WHERE dimension = 'campaign' AND cohort_date BETWEEN DATE '2026-06-01' AND DATE '2026-06-30'
GROUP BY ALL ORDER BY roas_30d DESC
"""


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def test_full_then_incremental_refresh(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    data = seed_lake(tmp_path, "ws_r", users=800, days=30)
    url = reports_database(tmp_path, "ws_r")
    lake = LocalLake(tmp_path / "lake")
    last_day = date(2026, 6, 30)
    held_out = data.events.filter(pl.col("occurred_at").dt.date() == last_day)
    lake.partition_path(report_lake.CANONICAL_EVENTS, last_day).unlink()
    result = refresh(tmp_path, url, instance)
    assert result is not None and result.success
    done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert done >= {
        "acquisitions",
        "subscription_events",
        "active_days",
        "spend",
        "payback_daily",
        "cohort_activity",
        "payback",
    }
    assert {"cohort_curves", "ltv", "published_reports"} <= done
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks and all(checks.values()), checks
    # Day 30 has spend but no events yet: its spend is in the cube, and nothing derives from events there.
    assert len(report_lake.partition_days(lake, report_lake.ACQUISITIONS)) == 29
    assert last_day in report_lake.partition_days(lake, report_lake.PAYBACK_DAILY)
    assert refresh(tmp_path, url, instance) is None  # nothing changed: nothing runs

    def mtimes(dataset: str) -> dict[date, int]:
        return {d: p.stamp for d, p in report_lake.partition_days(lake, dataset).items()}

    def touched(dataset: str, since: dict[date, int] | None = None) -> list[date]:
        now, then = mtimes(dataset), before if since is None else since
        return [d for d in now if now[d] != then.get(d)]

    # The six-hourly case: a new day arrives; only that day is computed (then, in a run of their
    # own, the action signals of the cohorts whose first 30 days reach it).
    before = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.PAYBACK_DAILY).items()}
    signals_before = mtimes(report_lake.ACTION_SIGNALS)
    subscriptions_before = mtimes(report_lake.SUBSCRIPTION_METRICS)
    assert min(subscriptions_before) == START and max(subscriptions_before) <= datetime.now(UTC).date()
    demo.write_event_partitions(lake, held_out)
    again = refresh(tmp_path, url, instance)
    assert again is not None and again.success
    assert touched(report_lake.PAYBACK_DAILY) == [last_day]
    assert touched(report_lake.ACTION_SIGNALS, signals_before) == [
        last_day - timedelta(days=k) for k in range(29, -1, -1)
    ]
    # Subscription metrics are recomputed whole; only the held-out day and the later days whose
    # stocks it changed are rewritten.
    rewritten = touched(report_lake.SUBSCRIPTION_METRICS, subscriptions_before)
    assert rewritten and min(rewritten) == last_day
    partitions = {e.partition for e in again.get_asset_materialization_events() if e.asset_key == acquisitions.key}
    assert partitions == {last_day.isoformat()}
    cube = report_lake.scan_table(lake, report_lake.PAYBACK).collect()
    assert cube.filter(pl.col("dimension") == "campaign")["installs"].sum() == 800

    # Late events for an old day: that day, and for the weekly activity the six after it too.
    before, activity = mtimes(report_lake.PAYBACK_DAILY), mtimes(report_lake.COHORT_ACTIVITY)
    subscriptions_before = mtimes(report_lake.SUBSCRIPTION_METRICS)
    late_day = date(2026, 6, 10)
    demo.write_event_partitions(lake, data.events.filter(pl.col("occurred_at").dt.date() == late_day))
    assert refresh(tmp_path, url, instance).success
    assert touched(report_lake.PAYBACK_DAILY) == [late_day]
    assert touched(report_lake.SUBSCRIPTION_METRICS, subscriptions_before) == []  # the same events: no day changed
    assert touched(report_lake.COHORT_ACTIVITY, activity) == [date(2026, 6, d) for d in range(10, 17)]
    assert_frame_equal(report_lake.scan_table(lake, report_lake.PAYBACK).collect(), cube)

    # The analyst catalog views answer the README's query.
    counts = build_catalog(tmp_path / "warehouse.duckdb", lake, REPORT_VIEWS)
    assert counts["payback"] == cube.height and counts["cohorts"] > 0 and counts["spend"] > 0
    assert counts["subscription_metrics"] > 0 and counts["subscription_movements"] > 0
    impressions = data.events.filter(pl.col("event_type") == "paywall_impression").height
    assert (
        counts["paywall_events"] == impressions + data.events.filter(pl.col("event_type") == "paywall_offer_tap").height
    )
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(README_QUERY).fetchall()
        comment = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE table_name = 'payback' AND column_name = 'day'"
        ).fetchone()
        steps = dict(con.execute("SELECT step, count(*) FROM paywall_events GROUP BY step").fetchall())
        actives = con.execute(
            "SELECT sum(active_subscriptions) FROM subscription_metrics WHERE date = DATE '2026-06-29'"
        ).fetchone()
    assert {r[0] for r in rows} >= {"meta_broad", "organic"} and comment[0].startswith("Days since install")
    assert steps["impression"] == impressions and set(steps) == {"impression", "offer_tap"}
    assert actives is not None and actives[0] > 0


def test_schedule_and_first_refresh_sensor_request_the_changed_days(settings: Settings, db: Database) -> None:
    data_dir = settings.data_dir
    files = DataDirResource(root=str(data_dir))
    resources = {"data_dir": files, "database": DatabaseResource(url=settings.database_url)}
    context = dg.build_schedule_context(resources={"data_dir": files})
    assert isinstance(reports_schedule(context), dg.SkipReason)
    assert reports_schedule.cron_schedule == REFRESH_CRON == "0 */6 * * *"
    data = seed_lake(data_dir, "ws_s", users=100, days=5)
    [request] = reports_schedule(context)
    assert (request.tags[ASSET_PARTITION_RANGE_START_TAG], request.tags[ASSET_PARTITION_RANGE_END_TAG]) == (
        START.isoformat(),
        date(2026, 6, 5).isoformat(),
    )
    assert request.tags[STALE_DAYS_ONLY_TAG] == "true"
    assert set(request.asset_selection or []) == {a.key for a in ASSETS}  # the first refresh: every asset
    [sensor_request] = reports_sensor(dg.build_sensor_context(resources=resources))
    assert sensor_request.run_key

    # Landed events not yet in the lake: the first publish waits for them.
    land_frame(db, data.events.head(1).with_columns(pl.lit("evt_pending").alias("event_id")))
    assert isinstance(reports_sensor(dg.build_sensor_context(resources=resources)), dg.SkipReason)
    with db.write() as conn:
        conn.execute(landed_events.update().values(in_lake=True))
    assert isinstance(reports_sensor(dg.build_sensor_context(resources=resources)), list)
    # An event stamped for a day that has not begun waits for its day; it holds nothing back.
    ahead = datetime.now(UTC) + timedelta(days=2)
    land_frame(
        db, data.events.head(1).with_columns(pl.lit("evt_ahead").alias("event_id"), pl.lit(ahead).alias("occurred_at"))
    )
    assert isinstance(reports_sensor(dg.build_sensor_context(resources=resources)), list)

    settings.paths.reports.parent.mkdir(parents=True, exist_ok=True)
    settings.paths.reports.write_bytes(b"")  # once published, the schedule owns refreshes
    assert isinstance(reports_sensor(dg.build_sensor_context(resources=resources)), dg.SkipReason)


def test_reports_are_in_the_definitions() -> None:
    repo = build_definitions().get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"payback", "cohort_curves", "spend", "acquisitions", "subscription_events", "published_reports"} <= keys
    assert repo.has_schedule_def("reports_schedule") and repo.has_job("reports_job")
    # Running from the first start of the daemon: nobody has to switch the six-hourly refresh on.
    assert repo.get_schedule_def("reports_schedule").default_status == dg.DefaultScheduleStatus.RUNNING
    assert repo.get_sensor_def("reports_sensor").default_status == dg.DefaultSensorStatus.RUNNING
    assert payback.key.to_user_string() == "payback"


def test_quality_facts_catch_bad_frames() -> None:
    frame = pl.LazyFrame({k: [1, 1] for k in PAYBACK_KEY} | {"spend": [1.0, -2.0]})
    assert quality.duplicate_keys(frame, PAYBACK_KEY) == 1
    assert quality.negative_rows(frame, ["spend"]) == 1
    assert quality.row_count_drop(1000, 400, 0.5) and not quality.row_count_drop(1000, 900, 0.5)
    assert not quality.row_count_drop(None, 0, 0.5)
