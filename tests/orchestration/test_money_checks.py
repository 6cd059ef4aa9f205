"""The money checks fail on real lake data: garbage written straight to the lake (not through
ingest, which drops it) stops the publish, and the API keeps answering from the last good store."""

from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.support.money import reports_database
from tests.support.reports import refresh, seed_lake
from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.schemas import SPEND_SCHEMA
from warehouse.lake import Lake, LocalLake
from warehouse.reports import demo, report_lake, serving

WORKSPACE = "ws_money"
DAYS = 40
LAST = date(2026, 6, 1) + timedelta(days=DAYS - 1)


@pytest.fixture
def instance() -> dg.DagsterInstance:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture
def published(tmp_path: Path, instance: dg.DagsterInstance) -> tuple[Path, str, pl.DataFrame]:
    """A lake refreshed and published once; (data dir, database url, its canonical events)."""
    data = seed_lake(tmp_path, WORKSPACE, users=600, days=DAYS)
    url = reports_database(tmp_path, WORKSPACE)
    result = refresh(tmp_path, url, instance)
    assert result is not None and result.success
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks["subscription_events_converted"] and checks["spend_converted"]
    assert checks["payback_sums_bounded"] and checks["subscription_events_revenue_spike"]
    return tmp_path, url, data.events


def add_renewals(lake: Lake, events: pl.DataFrame, day: date, amounts: list[tuple[float, str]]) -> None:
    """Renewals of a paying user, appended to that day's canonical events partition."""
    payer = events.filter(pl.col("event_type") == "renewal").row(0, named=True)
    extra = pl.DataFrame(
        [
            payer
            | {
                "event_id": f"evt_garbage_{i}",
                "occurred_at": datetime.combine(day, datetime.min.time()).replace(tzinfo=payer["occurred_at"].tzinfo)
                + timedelta(hours=12),
                "properties": f'{{"currency":"{currency}","product_id":"weekly","revenue":{amount}}}',
            }
            for i, (amount, currency) in enumerate(amounts)
        ],
        schema=CANONICAL_EVENT_SCHEMA,
    )
    existing = report_lake.scan_days(lake, report_lake.CANONICAL_EVENTS, [day]).collect()
    demo.write_event_partitions(lake, pl.concat([existing, extra]))


def outcome(result: dg.ExecuteInProcessResult | None) -> tuple[dict[str, bool], dict[str, str | None], set[str]]:
    assert result is not None
    evaluations = result.get_asset_check_evaluations()
    done = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    return (
        {c.check_name: c.passed for c in evaluations},
        {c.check_name: c.description for c in evaluations},
        done,
    )


def test_an_unknown_currency_in_the_lake_stops_the_publish(
    published: tuple[Path, str, pl.DataFrame], instance: dg.DagsterInstance
) -> None:
    data_dir, url, events = published
    before = serving.published_meta(data_dir / "reports.duckdb").generated_at
    day = LAST - timedelta(days=3)
    add_renewals(LocalLake(data_dir / "lake"), events, day, [(9.99, "XXX")])
    passed, description, done = outcome(refresh(data_dir, url, instance))
    assert not passed["subscription_events_converted"]
    assert f"1 XXX on {day} in {WORKSPACE} (unknown_currency)" in (description["subscription_events_converted"] or "")
    assert "published_reports" not in done and "payback" not in done
    assert serving.published_meta(data_dir / "reports.duckdb").generated_at == before  # the last good store


def test_spend_in_a_currency_without_a_rate_stops_the_publish(
    published: tuple[Path, str, pl.DataFrame], instance: dg.DagsterInstance
) -> None:
    data_dir, url, _ = published
    before = serving.published_meta(data_dir / "reports.duckdb").generated_at
    row = {
        "workspace_id": WORKSPACE,
        "spend_date": LAST,
        "campaign": "meta_broad",
        "creative": "new",
        "country": "US",
        "spend": 100.0,
        "currency": "ARS",  # ISO 4217 money, but the ECB quotes no rate for it
    }
    report_lake.write_spend_raw(LocalLake(data_dir / "lake"), pl.DataFrame([row], schema=SPEND_SCHEMA))
    passed, description, done = outcome(refresh(data_dir, url, instance))
    assert not passed["spend_converted"]
    assert f"1 ARS on {LAST} in {WORKSPACE} (currency_without_rate)" in (description["spend_converted"] or "")
    assert "published_reports" not in done
    assert serving.published_meta(data_dir / "reports.duckdb").generated_at == before


def test_an_overflowing_spend_sum_stops_the_publish(
    published: tuple[Path, str, pl.DataFrame], instance: dg.DagsterInstance
) -> None:
    data_dir, url, _ = published
    before = serving.published_meta(data_dir / "reports.duckdb").generated_at
    # Two restated rows of different creatives: one campaign's spend sums past float64 to inf.
    rows = [
        {
            "workspace_id": WORKSPACE,
            "spend_date": LAST,
            "campaign": "meta_broad",
            "creative": creative,
            "country": "US",
            "spend": 1e308,
            "currency": "USD",
        }
        for creative in ("huge_1", "huge_2")
    ]
    report_lake.write_spend_raw(LocalLake(data_dir / "lake"), pl.DataFrame(rows, schema=SPEND_SCHEMA))
    passed, description, done = outcome(refresh(data_dir, url, instance))
    assert passed["spend_converted"]  # converted fine: the sum is what is wrong
    assert not passed["payback_sums_bounded"]
    assert "non-finite or overflowing" in (description["payback_sums_bounded"] or "")
    assert "published_reports" not in done
    assert serving.published_meta(data_dir / "reports.duckdb").generated_at == before


def test_a_revenue_spike_warns_but_publishes(
    published: tuple[Path, str, pl.DataFrame], instance: dg.DagsterInstance
) -> None:
    data_dir, url, events = published
    before = serving.published_meta(data_dir / "reports.duckdb").generated_at
    # Within the per-event bound each, but ten times any usual day together.
    add_renewals(LocalLake(data_dir / "lake"), events, LAST, [(14_000.0, "USD")] * 10)
    passed, description, done = outcome(refresh(data_dir, url, instance))
    assert not passed["subscription_events_revenue_spike"]
    assert f"{LAST} in {WORKSPACE}" in (description["subscription_events_revenue_spike"] or "")
    assert all(ok for name, ok in passed.items() if name != "subscription_events_revenue_spike"), passed
    assert "published_reports" in done
    assert serving.published_meta(data_dir / "reports.duckdb").generated_at != before


def test_days_written_before_conversion_are_recomputed_by_the_next_refresh(
    published: tuple[Path, str, pl.DataFrame], instance: dg.DagsterInstance
) -> None:
    """A data directory from before amounts were converted: its subscription events and spend
    lack the audit columns. Nothing new arrives, yet the next refresh rewrites those days (they
    are derived) and publishes the same numbers, rather than crash on the old files."""
    data_dir, url, _events = published
    lake = LocalLake(data_dir / "lake")
    before = report_lake.scan_table(lake, report_lake.PAYBACK).collect()
    for dataset in (report_lake.SUBSCRIPTION_EVENTS, report_lake.SPEND):
        for day, old in report_lake.partition_days(lake, dataset).items():
            lake.write_day(dataset, day, pl.read_parquet(old.location).drop("amount", "money_issue"))
    passed, _description, done = outcome(refresh(data_dir, url, instance))
    assert all(passed.values()) and "published_reports" in done
    for dataset in (report_lake.SUBSCRIPTION_EVENTS, report_lake.SPEND):
        for partition in report_lake.partition_days(lake, dataset).values():
            assert list(pl.read_parquet_schema(partition.location)) == list(report_lake.SCHEMAS[dataset])
    key = ["workspace_id", "cohort_date", "dimension", "value", "day"]
    assert_frame_equal(report_lake.scan_table(lake, report_lake.PAYBACK).collect().sort(key), before.sort(key))
