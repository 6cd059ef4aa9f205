"""The Adjust connector against a fake Report Service on 127.0.0.1 (tests/providers/adjust_fake.py):
what lands in `spend_raw`, and how refusals and outages end a sync."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from orchestration.syncs.connectors import connector_for
from orchestration.syncs.connectors.attribution_provider_a import CONNECTOR, client_for
from tests.providers.adjust_fake import TOKEN, AdjustFake, campaign_name, creative_name, running
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake
from warehouse.reports.report_lake import SPEND_RAW, partition_days, scan_days

NOW = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
TODAY = NOW.date()


@pytest.fixture
def fake() -> Iterator[AdjustFake]:
    with running(AdjustFake(campaigns=3, creatives=2, countries=2)) as served:
        yield served


def config(fake: AdjustFake, **extra: Any) -> ValidConfig:
    return validate_config("attribution_provider_a", {"api_token": TOKEN, "base_url": fake.url, **extra})


def sync(
    db: Database, lake: Lake, workspace_id: str, cfg: ValidConfig, *, now: datetime = NOW, **client: Any
) -> tuple[SyncTarget, list[str]]:
    target = SyncTarget(db, lake, workspace_id, "int_test", "attribution_provider_a", now=now)
    lines: list[str] = []
    CONNECTOR.sync(client_for(cfg, **client), target, cfg, lines.append)
    return target, lines


def spend(lake: Lake, days: list[date] | None = None) -> pl.DataFrame:
    return scan_days(lake, SPEND_RAW, days).collect().sort("spend_date", "campaign", "creative", "country")


def by_cell(frame: pl.DataFrame, day: date) -> dict[tuple[str, str, str], float]:
    rows = frame.filter(pl.col("spend_date") == day).iter_rows(named=True)
    return {(r["campaign"], r["creative"], r["country"]): r["spend"] for r in rows}


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    return LocalLake(tmp_path / "lake")


@pytest.fixture
def ws(workspace: dict[str, Any]) -> str:
    return str(workspace["workspace_id"])


def test_the_window_lands_as_the_report_names_it(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    target, lines = sync(db, lake, ws, config(fake, lookback_days=7))
    landed = spend(lake)
    days = [TODAY - timedelta(n) for n in range(6, -1, -1)]
    assert sorted(landed.get_column("spend_date").unique()) == days
    for day in days:
        assert by_cell(landed, day) == pytest.approx(fake.expected_spend(day))
    assert set(landed.get_column("currency")) == {"USD"}
    assert set(landed.get_column("country")) == {"US", "GB"}
    assert ("Campaign 01 (100001)", "Creative 01 (500101)", "GB") in by_cell(landed, TODAY)
    # Several pages of the window: 7 days in requests of at most 3 days, oldest first.
    assert [c["date_period"] for c in fake.calls] == [
        f"{days[0]}:{days[2]}",
        f"{days[3]}:{days[5]}",
        f"{days[6]}:{days[6]}",
    ]
    first = fake.calls[0]
    assert first["dimensions"] == "day,campaign,creative,country_code"
    assert first["metrics"] == "cost,installs"
    assert first["attribution_types"] == "click,engaged_ad"
    assert first["currency"] == "USD"
    assert first["utc_offset"] == "+00:00"  # days are UTC days, as the installs' cohort days
    assert "app_token__in" not in first
    assert target.records == landed.height == 7 * 3 * 2 * 2
    # Installs are the callbacks' to count: the report's figure is only reported.
    installs = target.state["last_report"]["installs"]
    assert installs > 0
    assert f"the report counts {installs} installs" in lines[-1]


def test_the_same_window_twice_changes_nothing(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    sync(db, lake, ws, config(fake))
    files = partition_days(lake, SPEND_RAW)
    before = {day: (lake.read_bytes(p), p.stamp) for day, p in files.items()}
    sync(db, lake, ws, config(fake))
    after = {day: (lake.read_bytes(p), p.stamp) for day, p in partition_days(lake, SPEND_RAW).items()}
    assert len(before) == 14
    assert after == before


def test_a_restated_day_replaces_the_old_figures(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    sync(db, lake, ws, config(fake))
    restated, untouched = TODAY - timedelta(3), TODAY - timedelta(4)
    old = spend(lake)
    fake.restated[restated] = 1.5
    fake.removed.add((restated, campaign_name(2)))
    sync(db, lake, ws, config(fake))
    new = spend(lake)
    assert by_cell(new, restated) == pytest.approx(fake.expected_spend(restated))
    assert not any(c == campaign_name(2) for c, _, _ in by_cell(new, restated))
    assert by_cell(new, untouched) == by_cell(old, untouched)
    assert new.height == old.height - 2 * 2  # campaign 2's creatives x countries vanished that day
    assert sum(by_cell(new, restated).values()) != pytest.approx(sum(by_cell(old, restated).values()))


def test_app_token_and_currency_are_asked_for(db: Database, lake: Lake, ws: str) -> None:
    with running(AdjustFake(campaigns=1, creatives=1, countries=1, apps=("app1", "app2"))) as fake:
        sync(db, lake, ws, config(fake, app_token="app2", currency="eur", lookback_days=1))
        assert fake.calls[0]["app_token__in"] == "app2"
        assert fake.calls[0]["currency"] == "EUR"
        landed = spend(lake)
        assert by_cell(landed, TODAY) == pytest.approx(fake.expected_spend(TODAY, ["app2"]))
        assert by_cell(landed, TODAY) != pytest.approx(fake.expected_spend(TODAY))  # both apps together
        assert set(landed.get_column("currency")) == {"EUR"}


def test_other_workspaces_spend_of_the_same_days_stays(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    other = pl.DataFrame(
        {
            "workspace_id": ["ws_other"],
            "spend_date": [TODAY],
            "campaign": ["theirs"],
            "creative": ["c"],
            "country": ["FR"],
            "spend": [5.0],
            "currency": ["EUR"],
        }
    )
    SyncTarget(db, lake, "ws_other", "int_other", "attribution_provider_a").replace_spend(other, [TODAY])
    sync(db, lake, ws, config(fake, lookback_days=2))
    landed = spend(lake, [TODAY])
    assert landed.filter(pl.col("workspace_id") == "ws_other").to_dicts() == other.to_dicts()


def test_429_waits_the_retry_after_it_is_given(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    fake.rate_limited, fake.retry_after = 1, "1"
    started = time.monotonic()
    _, lines = sync(db, lake, ws, config(fake, lookback_days=1), backoff_s=0.01)
    assert time.monotonic() - started >= 1.0
    assert fake.statuses == [429, 200]
    assert any("waiting 1.00 s" in line for line in lines)
    assert by_cell(spend(lake), TODAY) == pytest.approx(fake.expected_spend(TODAY))


def test_a_bare_429_backs_off_and_succeeds(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    fake.rate_limited = 2
    sync(db, lake, ws, config(fake, lookback_days=1), backoff_s=0.01)
    assert fake.statuses == [429, 429, 200]
    assert spend(lake).height == 3 * 2 * 2


def test_beyond_50_parallel_requests_adjust_answers_429(fake: AdjustFake) -> None:
    fake.max_parallel = 0  # every request is one too many
    with pytest.raises(ClientError) as failure:
        client_for(config(fake), backoff_s=0.01).report([TODAY])
    assert failure.value.code == "rate_limited"
    assert not failure.value.refused
    assert fake.statuses == [429] * 5


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_is_an_auth_failure_with_adjusts_words(
    db: Database, lake: Lake, ws: str, fake: AdjustFake, status: int
) -> None:
    if status == 401:
        cfg = validate_config("attribution_provider_a", {"api_token": "wrong-token", "base_url": fake.url})
        words = "Authentication failed: invalid or missing API token"
    else:
        fake.auth_status, cfg = 403, config(fake)
        words = "Forbidden: the user has no permission for this report"
    with pytest.raises(ClientError) as failure:
        sync(db, lake, ws, cfg)
    assert failure.value.code == "auth"
    assert failure.value.refused
    assert failure.value.status == status
    assert words in failure.value.message
    assert len(fake.calls) == 1  # a refusal is not retried
    assert not partition_days(lake, SPEND_RAW)


def test_every_call_refused_never_succeeds(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    fake.auth_status = 403
    for _ in range(3):
        with pytest.raises(ClientError):
            sync(db, lake, ws, config(fake))
        with pytest.raises(ClientError):
            CONNECTOR.check(client_for(config(fake)))
    assert set(fake.statuses) == {403}
    assert not partition_days(lake, SPEND_RAW)


def test_a_503_then_success(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    fake.unavailable = 1
    sync(db, lake, ws, config(fake, lookback_days=2), backoff_s=0.01)
    assert fake.statuses == [503, 200]
    assert spend(lake).height == 2 * 3 * 2 * 2


def test_503_every_time_fails_as_provider_error_and_leaves_the_window(
    db: Database, lake: Lake, ws: str, fake: AdjustFake
) -> None:
    sync(db, lake, ws, config(fake, lookback_days=2))
    before = spend(lake)
    fake.unavailable = 100
    with pytest.raises(ClientError) as failure:
        sync(db, lake, ws, config(fake, lookback_days=2), backoff_s=0.01)
    assert failure.value.code == "provider_error"
    assert not failure.value.refused
    assert spend(lake).equals(before)


def test_an_empty_report_empties_the_window(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    sync(db, lake, ws, config(fake, lookback_days=3))
    assert spend(lake).height
    fake.empty = True
    target, _ = sync(db, lake, ws, config(fake, lookback_days=3))
    assert fake.statuses[-1] == 204
    assert target.records == 0
    assert spend(lake).filter(pl.col("workspace_id") == ws).height == 0


def test_the_window_moves_with_the_clock(db: Database, lake: Lake, ws: str, fake: AdjustFake) -> None:
    sync(db, lake, ws, config(fake, lookback_days=2))
    sync(db, lake, ws, config(fake, lookback_days=2), now=NOW + timedelta(days=5))
    days = sorted(spend(lake).get_column("spend_date").unique())
    assert days == [TODAY - timedelta(1), TODAY, TODAY + timedelta(4), TODAY + timedelta(5)]


def test_a_report_we_cannot_read_is_a_bad_response(db: Database, lake: Lake, ws: str) -> None:
    class Garbled(AdjustFake):
        def _body(self, *args: Any) -> Any:
            return iter([b'{"rows": [{"day": "2026-11-20", "campaign": "x", "cost": "lots"}]}'])

    with running(Garbled()) as fake, pytest.raises(ClientError) as failure:
        sync(db, lake, ws, config(fake, lookback_days=1))
    assert failure.value.code == "bad_response"
    assert "'lots'" in failure.value.message


def test_check_summarises_one_cheap_call(fake: AdjustFake) -> None:
    summary = connector_for("attribution_provider_a").check(client_for(config(fake)))
    today = datetime.now(UTC).date().isoformat()
    assert summary == f"Adjust answered: 1 row for {today}"
    assert fake.calls[-1]["dimensions"] == "day"
    assert fake.calls[-1]["metrics"] == "cost"
    assert fake.calls[-1]["date_period"] == f"{today}:{today}"


def test_the_token_never_shows_in_the_clients_repr(fake: AdjustFake) -> None:
    assert TOKEN not in repr(client_for(config(fake)))


def test_a_currency_that_is_not_a_code_is_a_config_failure(fake: AdjustFake) -> None:
    with pytest.raises(ClientError) as failure:
        client_for(config(fake, currency="dollars"))
    assert failure.value.code == "config"


def test_synced_spend_meets_the_callbacks_installs_in_the_payback_report(
    tmp_path: Path, settings: Any, db: Database, ws: str, fake: AdjustFake
) -> None:
    """Install callbacks naming a campaign and creative as Adjust's placeholders do, and the
    same account's spend from a sync: the payback report puts both in one row, not the spend
    beside an "organic" install."""
    import dagster as dg

    from tests.support.money import LATEST
    from tests.support.reports import refresh
    from transforms.events import CanonicalEvent
    from transforms.ingest.attribution import ATTRIBUTION_PROVIDER_A, normalize
    from warehouse.events.landing import day_frame
    from warehouse.reports import demo, report_lake

    day = TODAY - timedelta(1)
    installs = []
    for n, (i, j, country) in enumerate([(0, 0, "us"), (0, 0, "gb"), (1, 1, "us")]):
        params = {
            "activity_kind": "install",
            "created_at": str(int(datetime(day.year, day.month, day.day, 10, n, tzinfo=UTC).timestamp())),
            "country": country,
            "os_name": "ios",
            "adid": f"adid-{n}",
            "user_id": f"user-{n}",
            "tracker_name": f"Meta::{campaign_name(i)}::Adgroup::{creative_name(i, j)}",
        }
        event = normalize(
            params,
            adapter=ATTRIBUTION_PROVIDER_A,
            workspace_id=ws,
            mapping={"activity_kind:install": "install"},
            received_at=NOW,
            latest_rates=LATEST,
        )
        assert isinstance(event, CanonicalEvent)
        installs.append(event)
    lake = LocalLake(tmp_path / "lake")
    target, _ = sync(db, lake, ws, config(fake, lookback_days=3))
    target.land_events(installs)
    with db.read() as conn:
        frame, _ = day_frame(conn, day)
    demo.write_event_partitions(lake, frame)
    with dg.DagsterInstance.ephemeral() as instance:
        result = refresh(tmp_path, settings.database_url, instance)
    assert result is not None and result.success
    cube = report_lake.scan_table(lake, report_lake.PAYBACK).collect()
    rows = cube.filter(
        (pl.col("workspace_id") == ws) & (pl.col("cohort_date") == day) & (pl.col("dimension") == "campaign")
    )
    per_campaign = {r["value"]: (r["installs"], r["spend"]) for r in rows.filter(pl.col("day") == 0).to_dicts()}
    expected = fake.expected_spend(day)
    for i, installed in ((0, 2), (1, 1), (2, 0)):
        spent = sum(v for (c, _, _), v in expected.items() if c == campaign_name(i))
        assert per_campaign[campaign_name(i)] == (installed, pytest.approx(spent))
    assert "organic" not in per_campaign
