"""The action signals materialized by real Dagster runs on a generated history: they agree with the
payback report the API serves, and a late refund rewrites exactly the cohorts whose 30 days it
falls in, moving their 30-day statistics and nothing else."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from orchestration.definitions import build_definitions
from orchestration.reports.jobs import reports_job
from tests.support.money import reports_database
from tests.support.reports import START, refresh, seed_lake
from transforms.reports.schemas import DIMENSIONS
from warehouse.lake import Lake, LocalLake
from warehouse.paths import DataPaths
from warehouse.reports import demo, report_lake, serving

DAYS = 45
LAST = START + timedelta(days=DAYS - 1)
WS = "ws_signals"


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def _signals(lake: Lake) -> pl.DataFrame:
    return report_lake.scan_days(lake, report_lake.ACTION_SIGNALS).collect()


def test_signals_agree_with_the_published_payback_report(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    seed_lake(tmp_path, WS, users=600, days=DAYS)
    result = refresh(tmp_path, reports_database(tmp_path, WS), instance)
    assert result is not None and result.success
    lake = LocalLake(tmp_path / "lake")
    signals = _signals(lake)
    assert signals.height > 0 and signals["installs"].sum() == 600
    mine = {
        row["campaign"]: row
        for row in signals.group_by("campaign")
        .agg(pl.col("installs", "spend", "trials", "subscriptions", "net_rev_d30").sum())
        .to_dicts()
    }
    reader = serving.ReportReader(DataPaths(tmp_path).reports)
    try:
        cur = reader.cursor()
        assert cur is not None
        report = serving.payback_rows(cur, workspace_id=WS, start=START, end=LAST, dimension="campaign", window=30)
        installs = dict(
            cur.execute(
                "SELECT value, sum(installs) FROM payback WHERE workspace_id = ? AND dimension = 'campaign' GROUP BY 1",
                [WS],
            ).fetchall()
        )
    finally:
        reader.close()
    assert {row["cohort"] for row in report} == set(mine) and len(mine) > 3
    for row in report:
        signal = mine[row["cohort"]]
        assert signal["installs"] == installs[row["cohort"]]
        assert round(signal["spend"], 2) == pytest.approx(row["spend"])
        assert (signal["trials"], signal["subscriptions"]) == (row["trials"], row["subscriptions"])
        roas = signal["net_rev_d30"] / signal["spend"] if signal["spend"] else None
        assert row["roas_30d"] == (pytest.approx(roas, abs=1e-4) if roas is not None else None)
    # Every cohort's observed days: those before the last day with events, at most 30.
    observed = signals.group_by("cohort_date").agg(pl.col("complete_days").unique())
    for cohort, days in observed.iter_rows():
        assert days == [min(30, (LAST - cohort).days)]


def test_a_late_refund_rewrites_the_cohorts_it_reaches_and_moves_only_their_30_day_statistics(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data = seed_lake(tmp_path, WS, users=600, days=DAYS)
    url = reports_database(tmp_path, WS)
    assert refresh(tmp_path, url, instance).success
    lake = LocalLake(tmp_path / "lake")
    before = _signals(lake)
    mtimes = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.ACTION_SIGNALS).items()}

    # A paying user of an early cohort is refunded $7.50 twenty days after installing.
    cohorts = report_lake.scan_days(lake, report_lake.ACQUISITIONS).collect()
    payers = (
        report_lake.scan_days(lake, report_lake.SUBSCRIPTION_EVENTS)
        .filter(pl.col("revenue") > 0)
        .select("user_id")
        .unique()
        .collect()
    )
    user = (
        cohorts.join(payers, on="user_id")
        .filter(pl.col("cohort_date") <= START + timedelta(days=5))
        .sort("cohort_date", "user_id")
        .row(0, named=True)
    )
    cohort: date = user["cohort_date"]
    refund_day = cohort + timedelta(days=20)
    template = data.events.filter(pl.col("event_type") == "refund").head(1)
    refund = template.with_columns(
        pl.lit("evt_late_refund").alias("event_id"),
        pl.lit(user["user_id"]).alias("user_id"),
        pl.lit(datetime.combine(refund_day, time(12), UTC)).cast(template.schema["occurred_at"]).alias("occurred_at"),
        pl.lit(json.dumps({"currency": "USD", "revenue": 7.5})).alias("properties"),
    )
    same_day = data.events.filter(pl.col("occurred_at").dt.date() == refund_day)
    demo.write_event_partitions(lake, pl.concat([same_day, refund.select(same_day.columns)]))
    assert refresh(tmp_path, url, instance).success

    after = _signals(lake)
    now = {d: p.stamp for d, p in report_lake.partition_days(lake, report_lake.ACTION_SIGNALS).items()}
    reached = [d for d in mtimes if refund_day - timedelta(days=30) <= d <= refund_day]
    assert [d for d in now if now[d] != mtimes[d]] == reached  # the cohorts whose window holds the day
    cell = [pl.col("cohort_date") == cohort, *[pl.col(d) == user[d] for d in DIMENSIONS]]
    old, new = before.filter(*cell).row(0, named=True), after.filter(*cell).row(0, named=True)
    assert new["net_rev_d30"] == pytest.approx(old["net_rev_d30"] - 7.5)
    assert new["refunds_n"] >= old["refunds_n"]
    for horizon in (7, 14):
        assert (new[f"net_rev_d{horizon}"], new[f"net_rev_sq_d{horizon}"]) == (
            old[f"net_rev_d{horizon}"],
            old[f"net_rev_sq_d{horizon}"],
        )
    key = ["cohort_date", *DIMENSIONS]
    unchanged = after.join(before.filter(*cell).select(key), on=key, how="anti").sort(key)
    assert_frame_equal(unchanged, before.join(before.filter(*cell).select(key), on=key, how="anti").sort(key))

    # And the same inputs refreshed from nothing give the same signals.
    fresh = tmp_path / "fresh"
    for dataset in (report_lake.CANONICAL_EVENTS, report_lake.SPEND_RAW):
        shutil.copytree(lake.dataset_dir(dataset), fresh / "lake" / dataset)
    with dg.DagsterInstance.ephemeral() as other:
        assert refresh(fresh, url, other).success
    assert_frame_equal(after.sort(key), _signals(LocalLake(fresh / "lake")).sort(key))


def test_the_six_hourly_job_and_flokit_refresh_select_the_signals() -> None:
    """`flokit refresh` and the schedule run `reports_job` (the reports group): the signals are in it."""
    definitions = build_definitions()
    keys = definitions.get_repository_def().asset_graph.get_all_asset_keys()
    assert dg.AssetKey(report_lake.ACTION_SIGNALS) in keys
    selected = definitions.resolve_job_def(reports_job.name).asset_layer.selected_asset_keys
    assert dg.AssetKey(report_lake.ACTION_SIGNALS) in selected
