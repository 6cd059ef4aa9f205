"""Reports refreshed on one host are served by another that shares no disk with it: the lake and
the published store live in a real object store (SeaweedFS), each host keeps its own copy."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from flask.testing import FlaskClient

from api.app import create_app
from tests.support import free_port, wait_for
from tests.support.money import reports_database
from tests.support.objects import bucket_keys
from tests.support.reports import refresh, seed_lake
from warehouse.objects import ObjectStore
from warehouse.paths import DataPaths
from warehouse.reports import report_lake, serving
from warehouse.reports.published import POINTER, Follower, ReportCopy
from warehouse.settings import Settings


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def payback(path: Path) -> pl.DataFrame:
    reader = serving.ReportReader(path)
    try:
        cur = reader.cursor()
        assert cur is not None
        return cur.sql("SELECT * FROM payback ORDER BY ALL").pl()
    finally:
        reader.close()


def test_a_refresh_on_a_worker_is_served_by_an_api_host_that_shares_no_disk(
    s3_url: str, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    worker, api_host = tmp_path / "worker", tmp_path / "api"
    url = reports_database(tmp_path / "db", "ws_h")  # the one operational database both hosts use
    seed_lake(worker, "ws_h", users=300, days=20, lake_url=s3_url)
    result = refresh(worker, url, instance, lake_url=s3_url)
    assert result is not None and result.success

    keys = bucket_keys(s3_url)
    assert POINTER in keys and "payback/_manifest.json" in keys
    assert any(k.startswith("canonical_events/date=2026-06-01/v=") for k in keys)
    assert not list(tmp_path.rglob("*.parquet"))  # no host holds a lake file

    api_paths = DataPaths(api_host, s3_url)
    store = api_paths.object_store()
    assert store is not None
    first = ReportCopy(api_paths, store).sync()
    assert first.changed and first.error is None and first.bytes_downloaded > 0
    expected = report_lake.scan_table(api_paths.lake(), report_lake.PAYBACK).collect()
    served = payback(api_paths.reports)
    assert served.height == expected.height > 0
    assert serving.published_meta(api_paths.reports) == serving.published_meta(DataPaths(worker).reports)
    assert ReportCopy(api_paths, store).sync().changed is False  # nothing new: one 304-sized check

    # A later refresh (one more day of spend) publishes a new version; the API host follows.
    more = pl.DataFrame(
        [
            {
                "workspace_id": "ws_h",
                "spend_date": expected["cohort_date"].max(),
                "campaign": "late",
                "creative": "c",
                "country": "US",
                "spend": 50.0,
                "amount": 50.0,
                "currency": "USD",
                "money_issue": None,
            }
        ],
        schema=report_lake.SCHEMAS[report_lake.SPEND_RAW],
    )
    report_lake.write_spend_raw(DataPaths(worker, s3_url).lake(), more)
    again = refresh(worker, url, instance, lake_url=s3_url)
    assert again is not None and again.success
    second = ReportCopy(api_paths, store).sync()
    assert second.changed and second.version != first.version
    spend = payback(api_paths.reports).filter(pl.col("dimension") == "campaign", pl.col("value") == "late")
    assert spend["spend"].sum() == pytest.approx(50.0)

    # The store unreachable: the host keeps serving the copy it has, and says why.
    dead = ObjectStore(
        s3_url,
        env={
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s",
        },
    )
    outage = ReportCopy(api_paths, dead).sync()
    assert outage.error is not None and "could not read" in outage.error and outage.version == second.version
    assert payback(api_paths.reports).height > 0

    # A host's follower says so once per outage (each attempt's error text differs: it names how
    # long the client tried), and once when the store answers again.
    said: list[str] = []
    follower = Follower(ReportCopy(api_paths, dead), said.append, poll_s=0.01)
    try:
        time.sleep(2.0)  # several failed polls (each takes the client's retries, about 0.4 s)
        assert [line.split(":")[0] for line in said] == ["object store unreachable"]
        follower.copy = ReportCopy(api_paths, store)
        wait_for(lambda: len(said) == 2, 60, "the store reachable again")
        assert said[1] == "object store reachable again"
    finally:
        follower.stop()


def test_an_api_host_that_cannot_reach_the_store_and_holds_no_copy_is_not_ready(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    host = dataclasses.replace(settings, data_dir=tmp_path / "api-host", lake_url="s3://flokit-nowhere/lake")
    client: FlaskClient = create_app(host).test_client()
    answer = client.get("/readyz")
    assert answer.status_code == 503 and answer.headers["Retry-After"]
    assert answer.get_json()["reason"].startswith(
        "reports: could not read s3://flokit-nowhere/lake/reports/current.json"
    )
    assert client.get("/healthz").status_code == 200
