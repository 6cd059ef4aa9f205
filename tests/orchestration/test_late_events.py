"""A late event for an old day: the refresh rewrites that day and what depends on it, not every
day since, and the published reports count it (real lake, real Dagster runs, real DuckDB file)."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
import yaml
from polars.testing import assert_frame_equal

from orchestration.definitions import build_definitions
from orchestration.partitions import range_tags
from orchestration.refresh import refresh as run_refresh
from orchestration.reports.assets import DAILY_ASSETS, TABLE_ASSETS
from orchestration.reports.jobs import REPORTS_WRITER_TAG, reports_job, reports_schedule
from orchestration.resources import DataDirResource
from tests.support import ROOT
from tests.support.money import reports_database
from tests.support.reports import START, refresh, seed_lake
from transforms.reports.schemas import PAYBACK_KEY
from warehouse import migrate
from warehouse.db import Database, utcnow
from warehouse.lake import Lake, LocalLake
from warehouse.paths import DataPaths
from warehouse.reports import demo, report_lake
from warehouse.settings import Settings
from warehouse.tables import workspaces

WORKSPACES = ("ws_late", "ws_far", "ws_move", "ws_full")


def url(directory: Path) -> str:
    """The operational database the report assets read reporting currencies from."""
    return reports_database(directory, *WORKSPACES)


DAYS = 21
LAST = START + timedelta(days=DAYS - 1)
DAILY = [report_lake.ACQUISITIONS, report_lake.SUBSCRIPTION_EVENTS, report_lake.ACTIVE_DAYS, report_lake.SPEND]
DAILY += [report_lake.PAYWALL_EVENTS]
DAILY += [report_lake.PAYBACK_DAILY, report_lake.COHORT_ACTIVITY]


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def _mtimes(lake: Lake) -> dict[str, dict[date, int]]:
    return {ds: {d: p.stamp for d, p in report_lake.partition_days(lake, ds).items()} for ds in DAILY}


def _rewritten(lake: Lake, before: dict[str, dict[date, int]]) -> dict[str, list[date]]:
    now = _mtimes(lake)
    return {ds: [d for d in now[ds] if now[ds][d] != before[ds].get(d)] for ds in DAILY}


def _land_late(lake: Lake, events: pl.DataFrame, day: date, event: pl.DataFrame) -> None:
    """The late event joins its day's file, rewritten whole as the ingest pipeline does."""
    same_day = events.filter(pl.col("occurred_at").dt.date() == day)
    demo.write_event_partitions(lake, pl.concat([same_day, event.select(same_day.columns)]))


def _install(events: pl.DataFrame, *, user_id: str, at: datetime, event_id: str) -> pl.DataFrame:
    """An install shaped like the history's (campaign and all), for `user_id` at `at`."""
    template = events.filter(pl.col("event_type") == "install").head(1)
    return template.with_columns(
        pl.lit(event_id).alias("event_id"),
        pl.lit(user_id).alias("user_id"),
        pl.lit(at).cast(template.schema["occurred_at"]).alias("occurred_at"),
    )


def _published_installs(data_dir: Path, cohort: date) -> int:
    path = DataPaths(data_dir).reports
    with duckdb.connect(str(path), read_only=True) as con:
        row = con.execute(
            "SELECT coalesce(sum(installs), 0) FROM payback WHERE dimension = 'campaign' AND cohort_date = ?",
            [cohort],
        ).fetchone()
    return int(row[0]) if row else 0


def _run_metadata(instance: dg.DagsterInstance, run_id: str) -> dict[str, int]:
    """Days recomputed per daily asset in one run (every partition of a range run carries the same)."""
    out: dict[str, int] = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        m = entry.asset_materialization
        if m is not None and "days" in m.metadata:
            out[m.asset_key.to_user_string()] = int(m.metadata["days"].value)  # type: ignore[arg-type]
    return out


def test_a_late_install_on_an_old_day_rewrites_that_day_and_what_reads_it(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data = seed_lake(tmp_path, "ws_late", users=400, days=DAYS)
    lake = LocalLake(tmp_path / "lake")
    assert refresh(tmp_path, url(tmp_path), instance).success
    late_day = START + timedelta(days=3)
    installs_before = _published_installs(tmp_path, late_day)
    before = _mtimes(lake)

    signals_before = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.ACTION_SIGNALS).items()}
    runs_before = {r.run_id for r in instance.get_runs()}

    late = _install(
        data.events, user_id="late_user", at=datetime.combine(late_day, datetime.min.time(), UTC), event_id="evt_late"
    )
    _land_late(lake, data.events, late_day, late)
    result = refresh(tmp_path, url(tmp_path), instance)
    assert result is not None and result.success
    block_run, signals_run = [r.run_id for r in reversed(instance.get_runs()) if r.run_id not in runs_before]
    assert block_run == result.run_id  # the run that published

    rewritten = _rewritten(lake, before)
    week = [late_day + timedelta(days=k) for k in range(7)]
    assert rewritten == {
        report_lake.ACQUISITIONS: [late_day],
        report_lake.SUBSCRIPTION_EVENTS: [late_day],
        report_lake.ACTIVE_DAYS: [late_day],
        report_lake.PAYWALL_EVENTS: [late_day],
        report_lake.SPEND: [],
        report_lake.PAYBACK_DAILY: [late_day],
        report_lake.COHORT_ACTIVITY: week,  # the weekly activity of D..D+6 looks back at D
    }
    # The run still spans the stale days' range (one block), but each asset says what it recomputed.
    assert _run_metadata(instance, result.run_id) == {
        "acquisitions": 1,
        "subscription_events": 1,
        "active_days": 1,
        "paywall_events": 1,
        "payback_daily": 1,
        "cohort_activity": 7,
    }  # spend is not in the run: no spend was delivered
    # Then, in a run of their own, the action signals of the cohorts whose first 30 days reach it.
    signals_now = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.ACTION_SIGNALS).items()}
    reached = [START + timedelta(days=k) for k in range(4)]
    assert [d for d in signals_now if signals_now[d] != signals_before[d]] == reached
    assert _run_metadata(instance, signals_run) == {"action_signals": 4}
    assert _published_installs(tmp_path, late_day) == installs_before + 1
    assert refresh(tmp_path, url(tmp_path), instance) is None  # nothing left stale


def test_a_late_day_far_back_and_today_are_two_runs_with_nothing_between(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data = seed_lake(tmp_path, "ws_far", users=300, days=DAYS)
    lake = LocalLake(tmp_path / "lake")
    held_out = data.events.filter(pl.col("occurred_at").dt.date() == LAST)
    lake.partition_path(report_lake.CANONICAL_EVENTS, LAST).unlink()
    assert refresh(tmp_path, url(tmp_path), instance).success
    runs_before = {r.run_id for r in instance.get_runs()}

    far = START - timedelta(days=400)
    late = _install(data.events, user_id="far_user", at=datetime.combine(far, datetime.min.time(), UTC), event_id="e1")
    demo.write_event_partitions(lake, late)
    demo.write_event_partitions(lake, held_out)  # and the current day arrives, as every six hours
    # What the daemon is asked for: the far block's daily assets, then the current day's and the tables,
    # then the action signals of the cohorts whose first 30 days reach the current day, one at a time
    # (the writer tag is limited to one run in the instance configs) in that order.
    context = dg.build_schedule_context(resources={"data_dir": DataDirResource(root=str(tmp_path))})
    far_request, last_request, signals_request = reports_schedule(context)
    # Only the assets with stale days in each block (no spend was delivered for either). The far
    # day's signals ride along: no later block rewrites a day of its cohort's first 30.
    from_events = {dg.AssetKey(ds) for ds in DAILY if ds != report_lake.SPEND}
    signals = dg.AssetKey(report_lake.ACTION_SIGNALS)
    assert set(far_request.asset_selection or []) == from_events | {signals}
    assert set(last_request.asset_selection or []) == from_events | {a.key for a in TABLE_ASSETS}
    assert set(signals_request.asset_selection or []) == {signals}
    assert {r.tags[REPORTS_WRITER_TAG] for r in (far_request, last_request, signals_request)} == {"1"}
    result = refresh(tmp_path, url(tmp_path), instance)
    assert result is not None and result.success

    runs = [r for r in reversed(instance.get_runs()) if r.run_id not in runs_before]  # oldest first
    assert [
        (r.tags["dagster/asset_partition_range_start"], r.tags["dagster/asset_partition_range_end"]) for r in runs
    ] == [
        (far.isoformat(), far.isoformat()),  # no weekly activity after it to look back at it
        (LAST.isoformat(), LAST.isoformat()),
        (START.isoformat(), LAST.isoformat()),  # the action signals of the cohorts before it
    ]
    # The far block computes the daily assets only; the tables are rebuilt once, by the last run.
    table_keys = {a.key for a in TABLE_ASSETS}
    logs = instance.all_logs(runs[0].run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    first = {e.asset_materialization.asset_key for e in logs if e.asset_materialization}
    assert first and not first & table_keys
    assert table_keys <= {e.asset_key for e in result.get_asset_materialization_events()}
    # Nothing is written for the 400 days between.
    assert report_lake.partition_days(lake, report_lake.PAYBACK_DAILY).keys() == {far} | {
        START + timedelta(days=k) for k in range(DAYS)
    }
    assert _published_installs(tmp_path, far) == 1


def test_a_late_install_that_moves_a_users_cohort_gives_what_a_full_recompute_gives(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data = seed_lake(tmp_path, "ws_move", users=400, days=DAYS)
    lake = LocalLake(tmp_path / "lake")
    assert refresh(tmp_path, url(tmp_path), instance).success

    # A paying user installed on day 10; a late callback says they first installed on day 2.
    cohorts = report_lake.scan_days(lake, report_lake.ACQUISITIONS).select("user_id", "cohort_date").collect()
    paying = report_lake.scan_days(lake, report_lake.SUBSCRIPTION_EVENTS).filter(pl.col("revenue") > 0).collect()
    candidates = cohorts.join(paying.select("user_id").unique(), on="user_id").filter(
        pl.col("cohort_date") >= START + timedelta(days=8)
    )
    user = candidates.sort("cohort_date", "user_id")["user_id"][0]
    moved_to = START + timedelta(days=2)
    late = _install(
        data.events.filter(pl.col("user_id") == user),
        user_id=user,
        at=datetime.combine(moved_to, datetime.min.time(), UTC),
        event_id="evt_move",
    )
    _land_late(lake, data.events, moved_to, late)
    result = refresh(tmp_path, url(tmp_path), instance)
    assert result is not None and result.success

    # The same lake inputs refreshed from nothing.
    fresh = tmp_path / "fresh"
    for dataset in (report_lake.CANONICAL_EVENTS, report_lake.SPEND_RAW):
        shutil.copytree(lake.dataset_dir(dataset), fresh / "lake" / dataset)
    with dg.DagsterInstance.ephemeral() as other:
        assert refresh(fresh, url(tmp_path), other).success
    key = list(PAYBACK_KEY)
    incremental = report_lake.scan_table(lake, report_lake.PAYBACK).collect().sort(key)
    full = report_lake.scan_table(LocalLake(fresh / "lake"), report_lake.PAYBACK).collect().sort(key)
    assert_frame_equal(incremental, full)
    curves = [
        report_lake.scan_table(lk, report_lake.COHORT_CURVES).collect() for lk in (lake, LocalLake(fresh / "lake"))
    ]
    columns = [c for c, kind in curves[0].schema.items() if kind != pl.Float64]
    assert_frame_equal(curves[0].sort(columns), curves[1].sort(columns))
    # The action signals too: the user left the old cohort day's rows and joined the new one's.
    signals = [
        report_lake.scan_days(lk, report_lake.ACTION_SIGNALS).collect() for lk in (lake, LocalLake(fresh / "lake"))
    ]
    signal_key = ["workspace_id", "cohort_date", "campaign", "creative", "country", "offer", "paywall"]
    assert_frame_equal(signals[0].sort(signal_key), signals[1].sort(signal_key))
    moved = incremental.filter((pl.col("dimension") == "campaign") & (pl.col("day") == 0))
    assert moved.filter(pl.col("cohort_date") == moved_to)["installs"].sum() >= 1


def test_a_range_run_without_the_tag_recomputes_every_day_of_its_range(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    seed_lake(tmp_path, "ws_full", users=200, days=10)
    lake = LocalLake(tmp_path / "lake")
    assert refresh(tmp_path, url(tmp_path), instance).success
    before = _mtimes(lake)
    # A backfill of days 3..7 launched from the Dagster UI: nothing changed, every day is recomputed.
    days = [START + timedelta(days=k) for k in range(2, 7)]
    job = build_definitions(Settings(data_dir=tmp_path, database_url=url(tmp_path))).resolve_job_def(reports_job.name)
    result = job.execute_in_process(
        instance=instance, tags=range_tags(days), asset_selection=[a.key for a in DAILY_ASSETS]
    )
    assert result.success
    assert all(_rewritten(lake, before)[ds] == days for ds in DAILY)
    assert set(_run_metadata(instance, result.run_id).values()) == {5}


@pytest.mark.parametrize("config", ["orchestration/instance/dagster.dev.yaml", "deploy/dagster.yaml"])
def test_the_instance_runs_one_reports_run_at_a_time(config: str) -> None:
    """Else the daemon could finish the far block after the run that published the tables."""
    limits = yaml.safe_load((ROOT / config).read_text())["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {"key": REPORTS_WRITER_TAG, "limit": 1} in limits


@pytest.mark.both_backends(
    reason="PostgreSQL coverage of warehouse/: reports/report_lake.py, reports/serving.py, fx.py"
)
def test_flokit_refresh_reports_every_run_of_a_refresh(settings: Settings, db: Database) -> None:
    migrate.upgrade(db)
    with db.write() as conn:  # the report assets read its reporting currency
        conn.execute(
            workspaces.insert().values(
                id="ws_cli", name="ws_cli", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
    data_dir = settings.data_dir
    data = seed_lake(data_dir, "ws_cli", users=100, days=5)
    far = START - timedelta(days=30)
    lake = settings.paths.lake()
    demo.write_event_partitions(
        lake, _install(data.events, user_id="u_far", at=datetime.combine(far, datetime.min.time(), UTC), event_id="e")
    )
    with dg.DagsterInstance.ephemeral() as instance:
        outcomes = run_refresh(build_definitions(settings), instance, db, lake)
    # The far day's action signals read day 30 of its cohort, the history's first day, which the
    # second block writes: they run after it, on their own.
    assert [(o.name, o.partition, o.success) for o in outcomes] == [
        ("reports", far.isoformat(), True),
        ("reports", f"{START.isoformat()}..{(START + timedelta(days=4)).isoformat()}", True),
        ("reports", far.isoformat(), True),
        ("actions_engine", None, True),
        ("analyst_catalog", None, True),
    ]
    assert "payback" not in outcomes[0].assets and "published_reports" in outcomes[1].assets
    assert "action_signals" in outcomes[1].assets and outcomes[2].assets == ["action_signals"]
