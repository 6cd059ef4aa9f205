"""`flokit demo seed` end to end: landed through the real path, then lake, refresh and the API."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from api.app import create_app
from tests.conftest import bearer
from tests.reports_support import refresh
from tests.support import ROOT
from warehouse.db import Database
from warehouse.events import landing
from warehouse.events.tables import landed_events
from warehouse.lake import Lake
from warehouse.reports import store
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e
FLOKIT = str(Path(sys.executable).parent / "flokit")


def seed(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.child_env()}
    return subprocess.run(
        [FLOKIT, "demo", "seed", *args, "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def write_landed_days_to_lake(db: Database, lake: Lake) -> None:
    """What the ingest pipeline's canonical_events asset does for each pending day."""
    with db.read() as conn:
        days = landing.pending_days(conn)
    for day in days:
        with db.read() as conn:
            frame, seqs = landing.day_frame(conn, day)
        lake.write(frame, lake.partition_path(store.CANONICAL_EVENTS, day))
        with db.write() as conn:
            landing.mark_in_lake(conn, seqs)


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

    lake = Lake(settings.lake_dir)
    write_landed_days_to_lake(db, lake)
    assert len(store.partition_days(lake, store.SPEND_RAW)) > 0
    with dg.DagsterInstance.ephemeral() as instance:
        run = refresh(settings.data_dir, settings.database_url, instance)
        assert run is not None and run.success
    client = create_app(settings).test_client()
    query = {"start_date": result["first_day"], "end_date": result["last_day"], "group_by": "country"}
    body = client.get("/v1/reports/payback", query_string=query, headers=bearer(workspace["api_key_read_only"])).json
    assert {r["cohort"] for r in body["data"]} == {"US", "GB", "DE", "FR", "BR", "JP"}
    assert body["meta"]["generated_at"] is not None


def test_seed_an_unknown_workspace_fails(settings: Settings) -> None:
    missing = seed(settings, "--workspace", "ws_nope", "--users", "5", "--days", "2")
    assert missing.returncode == 1 and "no workspace ws_nope" in missing.stderr
