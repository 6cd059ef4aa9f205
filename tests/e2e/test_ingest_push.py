"""AppsFlyer end to end: installs pushed to gunicorn the way AppsFlyer's
Push API sends them, the spend the Master API reports for them synced from a fake on 127.0.0.1,
`flokit refresh` (in-process, `tests.support.cli`), and the payback report in the analyst catalog meeting the two
on campaign and creative."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path

import duckdb
import pytest
import requests

from orchestration.syncs.connectors import connector_for
from tests.providers.appsflyer_fake import APP_ID, TOKEN, Row, appsflyer_fake
from tests.support import gunicorn_server
from tests.support.cli import Ran, flokit_in_process
from transforms.integrations.kinds import validate_config
from warehouse.db import Database
from warehouse.integrations.target import SyncTarget
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e
PATH = "/ingest/attribution_provider_b"
DAY = date(2026, 11, 20)


@pytest.fixture
def ingest_server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, **settings.child_env(), "FLOKIT_SURFACES": "ingest"}
    with gunicorn_server(env, workers=2, log_dir=tmp_path) as server:
        yield server.base


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


def test_pushed_installs_meet_the_synced_spend_in_the_payback_report(
    ingest_server: str, workspace: dict, settings: Settings, db: Database
) -> None:
    registered = flokit(
        settings, "admin", "ingest", "credentials", "--workspace", workspace["workspace_id"],
        "--vendor", "attribution_provider_b", "--app-token", APP_ID, "--json",
    )  # fmt: skip
    assert registered.returncode == 0, registered.stderr
    secret = json.loads(registered.stdout)["ingest_secret"]

    def install(n: int, **attribution: str) -> dict[str, str]:
        return {
            "app_id": APP_ID,
            "event_name": "install",
            "event_time": f"{DAY} 1{n}:00:00.000",
            "platform": "ios",
            "country_code": "US",
            "appsflyer_id": f"af-{n}",
            # The reports count a user's install (identity joins are by user): the app sets it
            # with the SDK's setCustomerUserId.
            "customer_user_id": f"u-{n}",
            **attribution,
        }

    paid = {"media_source": "Facebook Ads", "campaign": "spring_us", "af_adset": "broad", "af_ad": "video_1"}
    messages = [install(n, **paid) for n in range(4)] + [install(9, media_source="organic")]
    for message in messages:
        r = requests.post(ingest_server + PATH, params={"secret": secret}, json=message, timeout=10)
        assert r.json()["written"] == 1, r.text
    r = requests.post(ingest_server + PATH, params={"secret": secret}, json=messages[0], timeout=10)
    assert r.json()["duplicate"] == 1

    with appsflyer_fake() as fake:
        fake.rows = [
            Row(DAY, "spring_us", "broad", "video_1", "US", 30.0, installs=3),
            Row(DAY, "spring_us", "lookalike", "video_1", "US", 10.0, installs=1),
        ]
        connector = connector_for("attribution_provider_b")
        config = validate_config("attribution_provider_b", {"api_token": TOKEN, "app_id": APP_ID, "base_url": fake.url})
        now = datetime(2026, 11, 21, 6, 0, tzinfo=UTC)
        target = SyncTarget(
            db, settings.paths.lake(), workspace["workspace_id"], "int_e2e", "attribution_provider_b", now=now
        )
        connector.sync(connector.client(config), target, config, print)
    assert target.records == 1

    result = flokit(settings, "refresh", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    with duckdb.connect(str(settings.data_dir / "warehouse.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT dimension, value, sum(installs)::INT, round(sum(spend), 2) FROM payback "
            "WHERE dimension IN ('campaign', 'creative') GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    assert rows == [
        ("campaign", "organic", 1, 0.0),
        ("campaign", "spring_us", 4, 40.0),  # CAC = 40 / 4
        ("creative", "(none)", 1, 0.0),
        ("creative", "video_1", 4, 40.0),
    ]
