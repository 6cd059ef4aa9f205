"""`flokit demo seed` then `flokit refresh`, end to end as processes: landed through the real path,
then lake, reports, catalog and the API."""

import json
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa

from api.app import create_app
from tests.support import bearer
from tests.support.cli import Ran, flokit_in_process
from warehouse.db import Database
from warehouse.events import landing
from warehouse.events.tables import landed_events
from warehouse.reports import report_lake
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e
FLOKIT = str(Path(sys.executable).parent / "flokit")


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


def seed(settings: Settings, *args: str) -> Ran:
    return flokit(settings, "demo", "seed", *args, "--json")


def test_seed_lands_events_and_makes_reports_answerable(settings: Settings, db: Database, workspace: dict) -> None:
    args = ["--workspace", workspace["workspace_id"], "--users", "300", "--days", "20", "--seed", "3"]
    first = seed(settings, *args)
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)
    assert result["written"] == result["events"] > 300 and result["duplicate"] == 0
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date()
    assert result["last_day"] == yesterday.isoformat()
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(landed_events)).scalar_one() == result["events"]

    again = json.loads(seed(settings, *args).stdout)
    assert again["written"] == 0 and again["duplicate"] == result["events"]
    assert again["sandbox_ad_account_id"] == result["sandbox_ad_account_id"]  # connected once

    refreshed = flokit(settings, "refresh", "--json")
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    runs = json.loads(refreshed.stdout)["runs"]
    # The seed connected a sandbox ad account: the refresh syncs its registry, and the engine runs
    # after the reports.
    assert result["sandbox_ad_account_id"].startswith("adacct_")
    assert [r["name"] for r in runs] == [
        "ad_accounts_sync", "canonical_events", "reports", "actions_engine", "analyst_catalog",
    ]  # fmt: skip
    assert all(r["success"] for r in runs)
    assert len(report_lake.partition_days(settings.paths.lake(), report_lake.CANONICAL_EVENTS)) >= 20
    with db.read() as conn:
        assert landing.pending_days(conn) == {}
    client = create_app(settings).test_client()
    query = {"start_date": result["first_day"], "end_date": result["last_day"], "group_by": "country"}
    body = client.get("/v1/reports/payback", query_string=query, headers=bearer(workspace["api_key_read_only"])).json
    assert {r["cohort"] for r in body["data"]} == {"US", "GB", "DE", "FR", "BR", "JP"}
    assert body["meta"]["generated_at"] is not None
    with duckdb.connect(str(settings.paths.catalog), read_only=True) as con:
        events, payback = con.execute(
            "SELECT (SELECT count(*) FROM canonical_events), (SELECT count(*) FROM payback)"
        ).fetchone()
    assert events == result["events"] and payback > 0


def test_seed_an_unknown_workspace_fails(settings: Settings) -> None:
    missing = seed(settings, "--workspace", "ws_nope", "--users", "5", "--days", "2")
    assert missing.returncode == 1 and "no workspace ws_nope" in missing.stderr
