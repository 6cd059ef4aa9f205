"""The AppsFlyer spend sync against a fake Master API on 127.0.0.1 (real HTTP, real Parquet,
real database): the scenario matrix of issue 16 for a spend kind."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from clients.attribution_provider_b import AppsFlyerClient
from orchestration.syncs.connectors import connector_for
from tests.providers.appsflyer_fake import APP_ID, TOKEN, AppsFlyerFake, Row, appsflyer_fake
from transforms.client_errors import ClientError
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake
from warehouse.reports.report_lake import SPEND_RAW, scan_days

CONNECTOR = connector_for("attribution_provider_b")
NOW = datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
TODAY = NOW.date()


@pytest.fixture
def fake() -> Iterator[AppsFlyerFake]:
    with appsflyer_fake() as server:
        yield server


def config(fake: AppsFlyerFake, **extra: Any) -> Any:
    return validate_config(
        "attribution_provider_b", {"api_token": TOKEN, "app_id": APP_ID, "base_url": fake.url, **extra}
    )


def run(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict, *, now: datetime = NOW, wait_s: float = 0.05,
    **extra: Any,
) -> SyncTarget:  # fmt: skip
    cfg = config(fake, **extra)
    client: AppsFlyerClient = CONNECTOR.client(cfg)
    # Short waits keep the suite fast; the production default is a minute (bare 429s).
    client = client.model_copy(update={"rate_limit_wait_s": wait_s})
    http = client.http()
    http.rules = dataclasses.replace(http.rules, backoff_s=0.01)
    target = SyncTarget(db, lake, workspace["workspace_id"], "int_test", "attribution_provider_b", now=now)
    CONNECTOR.sync(client, target, cfg, print)
    return target


def spend(lake: Lake) -> list[tuple[Any, ...]]:
    frame = scan_days(lake, SPEND_RAW).collect()
    cols = ["spend_date", "campaign", "creative", "country", "spend", "currency"]
    return [tuple(r) for r in frame.sort(cols[:4]).select(cols).iter_rows()]


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return LocalLake(tmp_path / "lake")


def day(n: int) -> date:
    return TODAY - timedelta(days=n)


def test_spend_of_the_window_lands_summed_over_ad_sets(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.rows = [
        Row(day(1), "spring_us", "broad", "video_1", "US", 10.5, installs=3),
        Row(day(1), "spring_us", "lookalike", "video_1", "US", 4.5, installs=1),  # same ad, other ad set
        Row(day(1), "spring_us", "broad", "video_2", "DE", 2.0),
        Row(day(2), "brand", "all", "static_1", "US", 7.25),
        Row(day(2), "None", "None", "None", "US", 0, installs=40),  # organic: installs, no cost
        Row(day(9), "old", "a", "b", "US", 99.0),  # outside the 7-day window
    ]
    target = run(db, lake, fake, workspace)
    assert spend(lake) == [
        (day(2), "brand", "static_1", "US", 7.25, "USD"),
        (day(1), "spring_us", "video_1", "US", 15.0, "USD"),
        (day(1), "spring_us", "video_2", "DE", 2.0, "USD"),
    ]
    assert target.records == 3
    (call,) = fake.requests
    assert call["args"] == {
        "from": day(6).isoformat(),
        "to": TODAY.isoformat(),
        "groupings": "install_time,c,af_adset,af_ad,geo",
        "kpis": "cost,installs",
        "format": "json",
    }


def test_a_long_window_is_asked_for_in_pieces_of_31_days(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.rows = [Row(day(n), "c", "s", "ad", "US", 1.0) for n in range(0, 70, 7)]
    run(db, lake, fake, workspace, lookback_days=70)
    ranges = [(c["args"]["from"], c["args"]["to"]) for c in fake.requests]
    assert ranges == [
        (day(69).isoformat(), day(39).isoformat()),
        (day(38).isoformat(), day(8).isoformat()),
        (day(7).isoformat(), TODAY.isoformat()),
    ]
    assert len(spend(lake)) == 10


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/report_lake.py")
def test_a_restated_day_replaces_the_old_figures_and_a_second_sync_changes_nothing(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.rows = [Row(day(1), "spring_us", "broad", "video_1", "US", 10.0), Row(day(1), "gone", "x", "y", "FR", 3.0)]
    run(db, lake, fake, workspace)
    files = {p: p.stat().st_mtime_ns for p in lake.dataset_dir(SPEND_RAW).rglob("*.parquet")}
    run(db, lake, fake, workspace)  # the same window again: nothing changes, not even a file
    assert {p: p.stat().st_mtime_ns for p in lake.dataset_dir(SPEND_RAW).rglob("*.parquet")} == files
    assert len(spend(lake)) == 2

    fake.rows = [Row(day(1), "spring_us", "broad", "video_1", "US", 12.5)]  # AppsFlyer restated the day
    run(db, lake, fake, workspace)
    assert spend(lake) == [(day(1), "spring_us", "video_1", "US", 12.5, "USD")]


def test_another_workspaces_spend_of_the_same_days_is_left_alone(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    from warehouse.bootstrap import bootstrap

    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    fake.rows = [Row(day(1), "a", "s", "ad", "US", 1.0)]
    run(db, lake, fake, other)
    fake.rows = [Row(day(1), "b", "s", "ad", "US", 2.0)]
    run(db, lake, fake, workspace)
    frame = scan_days(lake, SPEND_RAW).collect()
    assert sorted(frame.select("workspace_id", "campaign").iter_rows()) == sorted(
        [(other["workspace_id"], "a"), (workspace["workspace_id"], "b")]
    )


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/report_lake.py, integrations/target.py")
def test_the_apps_own_currency_is_asked_for_with_currency_preferred(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "DE", 5.0)]
    run(db, lake, fake, workspace, currency="eur")
    assert fake.requests[0]["args"]["currency"] == "preferred"
    assert spend(lake)[0][-1] == "EUR"
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace, currency="EURO")
    assert info.value.code == "config" and "ISO 4217" in info.value.message


def test_an_empty_report_empties_the_window(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "US", 5.0)]
    run(db, lake, fake, workspace)
    fake.rows = []
    target = run(db, lake, fake, workspace)
    assert spend(lake) == [] and target.records == 0
    fake.fail_next = [(200, "", {})]  # an empty body, not even []
    assert run(db, lake, fake, workspace).records == 0


def test_a_bare_429_waits_and_retries(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "US", 5.0)]
    fake.fail_next = [(429, "Limit reached for master report", {})]
    started = time.monotonic()
    run(db, lake, fake, workspace, wait_s=0.4)
    waited = fake.requests[1]["at"] - fake.requests[0]["at"]
    assert 0.4 <= waited < 2 and time.monotonic() - started >= 0.4
    assert [r["status"] for r in fake.requests] == [429, 200] and len(spend(lake)) == 1


def test_a_retry_after_in_seconds_is_honoured(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "US", 5.0)]
    fake.fail_next = [(429, "Limit reached", {"Retry-After": "1"})]
    run(db, lake, fake, workspace, wait_s=0.0)
    assert fake.requests[1]["at"] - fake.requests[0]["at"] >= 1.0


def test_429_beyond_the_retry_budget_fails_rate_limited(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.fail_next = [(429, "Limit reached for master report", {})] * 5
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace, wait_s=0.01)
    assert info.value.code == "rate_limited" and "Limit reached" in info.value.message
    assert not info.value.refused and spend(lake) == []


def test_a_5xx_then_success(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "US", 5.0)]
    fake.fail_next = [(503, "Service Unavailable", {})]
    run(db, lake, fake, workspace)
    assert [r["status"] for r in fake.requests] == [503, 200] and len(spend(lake)) == 1


@pytest.mark.parametrize(
    ("change", "status", "text"),
    [
        ({"api_token": "revoked-token-1234567890"}, 401, "The supplied API token is invalid"),
        ({"app_id": "com.someone.else"}, 403, "Not authorized app-ids: com.someone.else"),
    ],
    ids=["bad-token", "foreign-app"],
)
def test_a_refusal_is_auth_with_appsflyers_words_and_writes_nothing(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict, change: dict, status: int, text: str
) -> None:
    fake.rows = [Row(day(1), "c", "s", "ad", "US", 5.0)]
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace, **change)
    assert (info.value.code, info.value.status, info.value.refused) == ("auth", status, True)
    assert text in info.value.message
    assert len(fake.requests) == 1  # a refusal is not retried
    assert spend(lake) == []


def test_every_call_refused_is_never_a_success(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    """A 70-day window is three calls: all refused, the sync fails at the first and writes nothing."""
    fake.token = "rotated-elsewhere"
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace, lookback_days=70)
    assert info.value.code == "auth" and spend(lake) == []


def test_an_answer_that_is_not_the_report_is_bad_response(
    db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict
) -> None:
    fake.fail_next = [(200, "<html>proxy login</html>", {})]
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace)
    assert info.value.code == "bad_response" and not info.value.refused
    fake.fail_next = [(200, '{"rows": []}', {})]
    with pytest.raises(ClientError) as info:
        run(db, lake, fake, workspace)
    assert info.value.code == "bad_response" and "list of rows" in info.value.message


def test_check_makes_one_cheap_call(fake: AppsFlyerFake) -> None:
    fake.rows = [Row(datetime.now(UTC).date() - timedelta(days=1), "c", "s", "ad", "US", 5.0, installs=7)]
    summary = CONNECTOR.check(CONNECTOR.client(config(fake)))
    assert "7 install(s)" in summary and APP_ID in summary
    (call,) = fake.requests
    assert call["args"]["groupings"] == "install_time" and call["args"]["kpis"] == "installs"
    with pytest.raises(ClientError) as info:
        CONNECTOR.check(CONNECTOR.client(config(fake, api_token="nope-nope-nope-nope")))
    assert info.value.code == "auth" and "The supplied API token is invalid" in info.value.message


def test_the_token_never_shows_in_the_clients_repr(fake: AppsFlyerFake) -> None:
    assert TOKEN not in repr(CONNECTOR.client(config(fake)))


def test_spend_frame_has_the_spend_schema(db: Database, lake: Lake, fake: AppsFlyerFake, workspace: dict) -> None:
    fake.rows = [Row(day(0), "c", "s", "ad", "us", 5.0)]
    run(db, lake, fake, workspace)
    frame = scan_days(lake, SPEND_RAW).collect()
    assert frame.schema["spend_date"] == pl.Date and frame.row(0, named=True)["country"] == "US"
