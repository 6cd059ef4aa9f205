"""Real data arriving end to end: installs reach gunicorn as Adjust's
callbacks (campaign and creative as its placeholders name them), the operator connects Adjust
with `flokit`, `POST /v1/integrations/{id}/sync` queues a sync, `flokit refresh` runs it as a
Dagster run against a fake Report Service on 127.0.0.1 and refreshes the reports: the payback
report shows exactly the synced spend, and CAC = spend / installs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests

from tests.providers.adjust_fake import TOKEN, AdjustFake, campaign_name, creative_name, running
from tests.support import gunicorn_server
from tests.support.cli import Ran, flokit_in_process
from tests.support.ingest import PATH, callback
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, **settings.child_env(), "FLOKIT_SURFACES": "v1,ingest"}
    with gunicorn_server(env, workers=2, log_dir=tmp_path) as running_server:
        yield running_server.base


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    env.pop("FLOKIT_SECRET_KEY", None)
    return flokit_in_process(env, *args)


def test_installs_by_callback_and_spend_by_sync_meet_in_the_payback_report(
    server: str, settings: Settings, workspace: dict, tmp_path: Path
) -> None:
    assert flokit(settings, "db", "upgrade").returncode == 0  # the instance key the credentials are sealed with
    today = datetime.now(UTC).date()
    days = [today - timedelta(days=2), today - timedelta(days=1)]
    # Installs: campaign 0 gets 3 per day, campaign 1 one per day; every install names its campaign
    # and creative (creative 0 of its campaign) the way Adjust's placeholders do.
    installs = {campaign_name(0): 3, campaign_name(1): 1}
    sent = 0
    for day in days:
        for i, (campaign, per_day) in enumerate(installs.items()):
            for n in range(per_day):
                at = datetime(day.year, day.month, day.day, 9 + n, tzinfo=UTC)
                params = callback(
                    workspace,
                    created_at=str(int(at.timestamp())),
                    adid=f"{day}-{i}-{n}",
                    user_id=f"user-{day}-{i}-{n}",
                    country="us",
                    campaign_name=campaign,
                    creative_name=creative_name(i, 0),
                )
                assert requests.get(server + PATH, params=params, timeout=10).json()["written"] == 1
                sent += 1

    with running(AdjustFake(campaigns=2, creatives=1, countries=1)) as fake:
        config = tmp_path / "adjust.json"
        config.write_text(json.dumps({"api_token": TOKEN, "base_url": fake.url, "lookback_days": 3}))
        done = flokit(
            settings, "admin", "integrations", "connect", "--workspace", workspace["workspace_id"],
            "--type", "attribution_provider_a", "--config", str(config), "--check", "--json",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        connected = json.loads(done.stdout)
        assert connected["status"] == "connected" and connected["check"].startswith("Adjust answered")
        integration_id = connected["integration_id"]

        rw = {"Authorization": f"Bearer {workspace['api_key_read_write']}"}
        queued = requests.post(f"{server}/v1/integrations/{integration_id}/sync", headers=rw, timeout=10)
        assert queued.status_code == 202
        sync_id = queued.json()["sync_id"]
        assert requests.post(f"{server}/v1/integrations/{integration_id}/sync", headers=rw, timeout=10).json() == {
            "status": "ok",
            "sync_id": sync_id,
        }
        refreshed = flokit(settings, "refresh", "--json")
        assert refreshed.returncode == 0, refreshed.stderr
        assert f"sync {sync_id}" in [run["name"] for run in json.loads(refreshed.stdout)["runs"]]
        expected = {day: fake.expected_spend(day) for day in days}

    ro = {"Authorization": f"Bearer {workspace['api_key_read_only']}"}
    detail = requests.get(f"{server}/v1/integrations/{integration_id}", headers=ro, timeout=10).json()["integration"]
    assert detail["status"] == "connected" and detail["error_message"] is None
    assert detail["last_synced_at"] is not None
    spend_rows = 3 * 2  # 3 days re-pulled (today included) x 2 campaigns x 1 creative x 1 country
    assert detail["sync_stats"]["events_total"] == sent + spend_rows
    assert detail["sync_stats"]["earliest_event_at"].startswith((today - timedelta(days=2)).isoformat())

    report = requests.get(
        f"{server}/v1/reports/payback",
        params={"start_date": days[0].isoformat(), "end_date": days[-1].isoformat(), "group_by": "campaign"},
        headers=ro,
        timeout=10,
    )
    assert report.status_code == 200, report.text
    rows = {row["cohort"]: row for row in report.json()["data"]}
    assert set(rows) == set(installs)  # no "organic": every install met its campaign
    for i, (campaign, per_day) in enumerate(installs.items()):
        synced = sum(cost for day in days for (c, _, _), cost in expected[day].items() if c == campaign)
        assert rows[campaign]["spend"] == pytest.approx(synced, abs=0.01)
        assert rows[campaign]["cac"] == pytest.approx(synced / (per_day * len(days)), abs=0.01), i


def test_a_refused_token_puts_the_integration_in_error_with_adjusts_words(
    server: str, settings: Settings, workspace: dict, tmp_path: Path
) -> None:
    assert flokit(settings, "db", "upgrade").returncode == 0
    with running(AdjustFake(campaigns=1, creatives=1, countries=1)) as fake:
        config = tmp_path / "adjust.json"
        config.write_text(json.dumps({"api_token": "revoked-token-0123456789", "base_url": fake.url}))
        checked = flokit(
            settings, "admin", "integrations", "connect", "--workspace", workspace["workspace_id"],
            "--type", "attribution_provider_a", "--config", str(config), "--check",
        )  # fmt: skip
        assert (
            checked.returncode == 1
            and "check failed (auth)" in checked.stderr
            and "nothing was saved" in checked.stderr
        )
        done = flokit(
            settings, "admin", "integrations", "connect", "--workspace", workspace["workspace_id"],
            "--type", "attribution_provider_a", "--config", str(config), "--json",
        )  # fmt: skip
        integration_id = json.loads(done.stdout)["integration_id"]
        rw = {"Authorization": f"Bearer {workspace['api_key_read_write']}"}
        assert (
            requests.post(f"{server}/v1/integrations/{integration_id}/sync", headers=rw, timeout=10).status_code == 202
        )
        assert flokit(settings, "refresh", "--json").returncode == 0
    ro = {"Authorization": f"Bearer {workspace['api_key_read_only']}"}
    [listed] = requests.get(f"{server}/v1/integrations", headers=ro, timeout=10).json()["integrations"]
    assert listed["status"] == "error" and listed["last_synced_at"] is None
    assert "HTTP 401" in listed["error_message"]
    shown = json.loads(
        flokit(settings, "admin", "integrations", "show", "--integration", integration_id, "--json").stdout
    )
    [sync] = shown["syncs"]
    assert (sync["status"], sync["error_code"]) == ("failed", "auth")
