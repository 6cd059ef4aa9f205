"""canonical_events partitions, the landed-events sensor, claim pruning, the analyst catalog and
the refresh, run for real: dg.materialize / execute_in_process, real Parquet and DuckDB files."""

import json
import subprocess
import sys
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import polars as pl
import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from orchestration.catalog.assets import analyst_catalog
from orchestration.definitions import build_definitions
from orchestration.events.assets import canonical_events
from orchestration.events.jobs import prune_dedup_claims_job
from orchestration.events.sensors import EVENTS_WRITER_TAG, build_canonical_events_sensor
from orchestration.partitions import range_label, range_tags
from orchestration.refresh import refresh
from orchestration.resources import DatabaseResource, DataDirResource
from tests.support.ingest import PATH, callback, counts
from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent
from warehouse.db import Database
from warehouse.events import landing
from warehouse.events.tables import event_claims, landed_events
from warehouse.settings import Settings

DAY = date(2026, 11, 20)


def resources(settings: Settings) -> dict[str, Any]:
    return {
        "database": DatabaseResource(url=settings.database_url),
        "data_dir": DataDirResource(root=str(settings.data_dir)),
    }


def send(client: FlaskClient, workspace: dict, n: int, when: str = "2026-11-20T10:00:00Z", prefix: str = "d") -> None:
    for i in range(n):
        assert (
            client.get(
                PATH, query_string=callback(workspace, adid=f"{prefix}{i}", user_id=f"u-{prefix}{i}", created_at=when)
            ).json["written"]
            == 1
        )


def partition_file(settings: Settings, day: date = DAY) -> Path:
    return settings.paths.lake_dir / "canonical_events" / f"date={day.isoformat()}" / "part.parquet"


def materialize_day(settings: Settings, day: date = DAY) -> dg.ExecuteInProcessResult:
    return dg.materialize([canonical_events], resources=resources(settings), partition_key=day.isoformat())


def materialize_range(settings: Settings, first: str, last: str) -> dg.ExecuteInProcessResult:
    days = [date.fromisoformat(first), date.fromisoformat(last)]
    return dg.materialize([canonical_events], resources=resources(settings), tags=range_tags(days))


def test_a_partition_is_written_whole_and_idempotently(
    settings: Settings, client: FlaskClient, workspace: dict, db: Database
) -> None:
    send(client, workspace, 3)
    result = materialize_day(settings)
    assert result.success
    frame = pl.read_parquet(partition_file(settings))
    assert frame.schema == pl.Schema(CANONICAL_EVENT_SCHEMA) and frame.height == 3
    mat = result.asset_materializations_for_node("canonical_events")[0]
    assert mat.metadata["dagster/row_count"].value == 3 and mat.metadata["newly_landed"].value == 3
    assert "adid" in mat.metadata["preview"].value
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"unique_event_id": True, "occurred_at_not_null": True}
    with db.read() as conn:
        assert landing.pending_days(conn) == {}

    # A late event for the same day re-materializes the day: old rows kept, new one added.
    send(client, workspace, 1, prefix="late")
    assert materialize_day(settings).success
    again = pl.read_parquet(partition_file(settings))
    assert again.height == 4
    # Rerunning with nothing new gives the same file content.
    assert materialize_day(settings).success
    assert pl.read_parquet(partition_file(settings)).equals(again)


def test_a_redelivery_after_the_dedup_window_is_not_doubled_in_the_lake(settings: Settings, db: Database) -> None:
    t = datetime(2026, 11, 20, 9, tzinfo=UTC)
    e = CanonicalEvent(
        event_id="evt_x", workspace_id="ws_1", event_type="install", occurred_at=t, source="t", received_at=t
    )
    with db.write() as conn:
        landing.land(conn, [e])
    with db.write() as conn:
        landing.prune_claims(conn, datetime.now(UTC) + timedelta(seconds=1))  # window passed
    with db.write() as conn:
        assert landing.land(conn, [e]).written == ("evt_x",)  # lands again after the window
    result = materialize_day(settings)
    assert result.success and pl.read_parquet(partition_file(settings)).height == 1


def test_sensor_requests_one_run_per_block_of_pending_days_with_deterministic_keys(
    settings: Settings, client: FlaskClient, workspace: dict
) -> None:
    sensor = build_canonical_events_sensor(5)
    res = {"database": DatabaseResource(url=settings.database_url)}
    with dg.build_sensor_context(resources=res) as ctx:
        assert isinstance(sensor(ctx), dg.SkipReason)

    send(client, workspace, 2, when="2026-11-17T10:00:00Z", prefix="a")
    send(client, workspace, 1, when="2026-11-20T10:00:00Z", prefix="b")
    with dg.build_sensor_context(resources=res) as ctx:
        first = sensor(ctx)
    (request,) = first.run_requests
    assert range_label(request.tags) == "2026-11-17..2026-11-20" and request.tags[EVENTS_WRITER_TAG] == "1"
    with dg.build_sensor_context(resources=res) as ctx:
        assert [r.run_key for r in sensor(ctx).run_requests] == [request.run_key]

    # Same pending state: nothing new to request. A new row: a new run over the pending days.
    with dg.build_sensor_context(resources=res, cursor=first.cursor) as ctx:
        assert isinstance(sensor(ctx), dg.SkipReason)
    send(client, workspace, 1, when="2026-11-20T11:00:00Z", prefix="c")
    with dg.build_sensor_context(resources=res, cursor=first.cursor) as ctx:
        (later,) = sensor(ctx).run_requests
    assert later.run_key != request.run_key and range_label(later.tags) == "2026-11-17..2026-11-20"

    # A late event weeks back: a run of its own, not one over every day since; the block whose
    # pending state did not change keeps its key (Dagster does not run it twice).
    send(client, workspace, 1, when="2026-10-01T09:00:00Z", prefix="d")
    with dg.build_sensor_context(resources=res, cursor=first.cursor) as ctx:
        old, recent = sensor(ctx).run_requests
    assert [range_label(r.tags) for r in (old, recent)] == ["2026-10-01", "2026-11-17..2026-11-20"]
    assert recent.run_key == later.run_key and old.run_key not in (later.run_key, request.run_key)


def test_a_range_run_rewrites_only_the_days_that_changed(
    settings: Settings, client: FlaskClient, workspace: dict, db: Database
) -> None:
    send(client, workspace, 2, when="2026-11-17T10:00:00Z", prefix="a")
    send(client, workspace, 1, when="2026-11-20T10:00:00Z", prefix="b")
    first = materialize_range(settings, "2026-11-17", "2026-11-20")
    assert first.success
    (mat,) = {m.metadata["days_written"].value for m in first.asset_materializations_for_node("canonical_events")}
    assert mat == 2
    assert {partition_file(settings, date(2026, 11, d)).exists() for d in (18, 19)} == {False}
    before = partition_file(settings, date(2026, 11, 17)).stat().st_mtime_ns

    send(client, workspace, 1, when="2026-11-20T12:00:00Z", prefix="late")
    assert materialize_range(settings, "2026-11-17", "2026-11-20").success
    assert partition_file(settings, date(2026, 11, 17)).stat().st_mtime_ns == before  # unchanged day untouched
    assert pl.read_parquet(partition_file(settings)).height == 2
    with db.read() as conn:
        assert landing.pending_days(conn) == {}

    partition_file(settings, date(2026, 11, 17)).unlink()  # a lost file is rebuilt from landed rows
    assert materialize_range(settings, "2026-11-17", "2026-11-17").success
    assert pl.read_parquet(partition_file(settings, date(2026, 11, 17))).height == 2


def test_prune_job_drops_only_claims_past_30_days(settings: Settings, db: Database) -> None:
    old = datetime.now(UTC) - timedelta(days=31)
    e = CanonicalEvent(
        event_id="evt_o", workspace_id="ws_1", event_type="install", occurred_at=old, source="t", received_at=old
    )
    fresh = CanonicalEvent(
        event_id="evt_f", workspace_id="ws_1", event_type="install", occurred_at=old, source="t", received_at=old
    )
    with db.write() as conn:
        landing.land(conn, [e, fresh])
        conn.execute(event_claims.update().where(event_claims.c.event_id == "evt_o").values(claimed_at=old))
    result = prune_dedup_claims_job.execute_in_process(
        resources={"database": DatabaseResource(url=settings.database_url)}
    )
    assert result.success and result.output_for_node("prune_dedup_claims") == 1
    assert counts(db) == (1, 2)


def test_catalog_is_built_and_readable_while_being_rebuilt(
    settings: Settings, client: FlaskClient, workspace: dict
) -> None:
    send(client, workspace, 3)
    assert materialize_day(settings).success
    result = dg.materialize([analyst_catalog], resources=resources(settings))
    assert result.success
    mat = result.asset_materializations_for_node("analyst_catalog")[0]
    assert mat.metadata["rows/canonical_events"].value == 3

    errors: list[Exception] = []
    reads = 0
    stop = threading.Event()

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                with duckdb.connect(str(settings.paths.catalog), read_only=True) as con:
                    assert con.execute("SELECT count(*) FROM canonical_events").fetchone()[0] == 3
                reads += 1
            except Exception as exc:
                errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for _ in range(5):
            assert dg.materialize([analyst_catalog], resources=resources(settings)).success
    finally:
        stop.set()
        thread.join()
    assert errors == [] and reads > 0
    with duckdb.connect(str(settings.paths.catalog), read_only=True) as con:
        cols = [r[0] for r in con.execute("DESCRIBE canonical_events").fetchall()]
        props = con.execute(
            "SELECT json_extract_string(properties, '$.activity_kind') FROM canonical_events"
        ).fetchall()
    assert cols == list(CANONICAL_EVENT_SCHEMA) and props == [("install",)] * 3

    # What an analyst types (README): the `duckdb` shell installed with FloKit reads the file.
    shell = subprocess.run(
        [str(Path(sys.executable).parent / "duckdb"), "-json", "-readonly", str(settings.paths.catalog), "-c",
         "select * from canonical_events limit 5"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert shell.returncode == 0, shell.stderr
    rows = json.loads(shell.stdout)
    assert len(rows) == 3 and {r["event_type"] for r in rows} == {"install"} and rows[0]["event_id"].startswith("evt_")


def test_refresh_writes_pending_days_then_reports_then_the_catalog(
    settings: Settings, client: FlaskClient, workspace: dict, db: Database, tmp_path: Path
) -> None:
    send(client, workspace, 2, when="2026-11-19T10:00:00Z", prefix="a")
    send(client, workspace, 1, when="2026-11-20T10:00:00Z", prefix="b")
    defs = build_definitions(settings)
    lake = settings.paths.lake()
    lines: list[str] = []
    with dg.DagsterInstance.ephemeral() as instance:
        outcomes = refresh(defs, instance, db, lake, lines.append)
        assert [(o.name, o.partition, o.success) for o in outcomes] == [
            ("canonical_events", "2026-11-19..2026-11-20", True),
            ("reports", "2026-11-19..2026-11-20", True),
            ("actions_engine", None, True),
            ("analyst_catalog", None, True),
        ]
        assert {"acquisitions", "payback", "published_reports"} <= set(outcomes[1].assets)
        runs = instance.get_runs()
        assert len(runs) == 4 and all(r.is_success for r in runs)
        # Nothing new: the engine re-evaluates (cheap) and the catalog is rebuilt.
        assert [o.name for o in refresh(defs, instance, db, lake)] == ["actions_engine", "analyst_catalog"]
    assert any("2 day(s)" in line for line in lines)
    with duckdb.connect(str(settings.paths.catalog), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM canonical_events").fetchone()[0] == 3
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        assert {"canonical_events", "payback", "cohorts", "spend"} <= views
        installs = con.execute("SELECT sum(installs) FROM payback WHERE dimension = 'campaign'").fetchone()[0]
    assert installs == 3


def test_definitions_include_the_events_domain(tmp_path: Path) -> None:
    defs = build_definitions(
        Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path}/x.db", sensor_interval_s=7)
    )
    repo = defs.get_repository_def()
    assert {"canonical_events", "analyst_catalog"} <= {
        k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()
    }
    sensor = repo.get_sensor_def("canonical_events_sensor")
    assert sensor.minimum_interval_seconds == 7
    assert repo.get_schedule_def("prune_dedup_claims_schedule").cron_schedule == "17 3 * * *"


@pytest.mark.both_backends(reason="a race: concurrent runs mark rows under each backend's locks")
def test_concurrent_runs_of_one_day_never_lose_marked_rows(
    settings: Settings, client: FlaskClient, workspace: dict, db: Database
) -> None:
    """Two runs of the same day racing with arriving events: whatever finishes last, every row
    marked as in the lake is in the file."""
    stop = threading.Event()

    def arrivals() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            client.get(PATH, query_string=callback(workspace, adid=f"live{i}", created_at="2026-11-20T10:00:00Z"))

    feeder = threading.Thread(target=arrivals)
    feeder.start()
    try:
        runs = [threading.Thread(target=materialize_day, args=(settings,)) for _ in range(2)]
        for run in runs:
            run.start()
        for run in runs:
            run.join()
    finally:
        stop.set()
        feeder.join()
    with db.read() as conn:
        marked = {
            r.event_id
            for r in conn.execute(sa.select(landed_events.c.event_id).where(landed_events.c.in_lake.is_(sa.true())))
        }
    in_file = set(pl.read_parquet(partition_file(settings))["event_id"].to_list())
    assert marked and marked <= in_file
