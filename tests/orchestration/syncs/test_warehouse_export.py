"""The warehouse export against a real S3 endpoint (moto's server on 127.0.0.1), a Snowflake
(fakesnow) and a lake of real Parquet partitions holding two workspaces' rows."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import fakesnow
import polars as pl
import pytest
import snowflake.connector
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from clients.warehouse_export import WarehouseExportClient
from orchestration.syncs.connectors.warehouse_export import CONNECTOR
from tests.providers.s3_export_fake import S3Export, authenticating, s3_export_server
from transforms.client_errors import ClientError
from transforms.demo import DemoConfig, generate
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database
from warehouse.integrations.export import EXPORTED
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake
from warehouse.reports import demo, report_lake

START = date(2026, 6, 1)
DAYS = 5
OTHER = "ws_someone_else"


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Export]:
    with s3_export_server() as server:
        yield server


@pytest.fixture
def ws(workspace: dict[str, Any]) -> str:
    return str(workspace["workspace_id"])


def _rows(schema: dict[str, pl.DataType], workspace_id: str, n: int, day: date | None, salt: int = 0) -> pl.DataFrame:
    """n rows of a report dataset for one workspace, every column filled by its type."""
    columns: dict[str, list[Any]] = {}
    for name, dtype in schema.items():
        if name == "workspace_id":
            columns[name] = [workspace_id] * n
        elif dtype == pl.String():
            columns[name] = [f"{name}-{i}-{salt}" for i in range(n)]
        elif dtype == pl.Date():
            columns[name] = [day or START] * n
        elif isinstance(dtype, pl.Datetime):
            columns[name] = [datetime(2026, 6, 1, tzinfo=UTC)] * n
        elif dtype.is_integer():
            columns[name] = [i + salt for i in range(n)]
        else:
            columns[name] = [float(i) + 0.5 + salt for i in range(n)]
    return pl.DataFrame(columns, schema=schema)


def seed(lake: Lake, ws: str) -> dict[str, int]:
    """Canonical events of two workspaces (the demo generator) and every exported report dataset
    with rows of both; returns this workspace's rows per expected object key (no prefix)."""
    mine = generate(DemoConfig(workspace_id=ws, users=40, days=DAYS, seed=3, start=START)).events
    theirs = generate(DemoConfig(workspace_id=OTHER, users=30, days=DAYS, seed=4, start=START)).events
    demo.write_event_partitions(lake, pl.concat([mine, theirs]))
    expected = {
        f"canonical_events/date={day}/part.parquet": n
        for day, n in mine.group_by(pl.col("occurred_at").dt.date()).len().iter_rows()
    }
    for i, dataset in enumerate(d for d in EXPORTED if d.name != report_lake.CANONICAL_EVENTS):
        if dataset.daily:
            for k in range(DAYS):
                day = START + timedelta(days=k)
                frame = pl.concat([_rows(dataset.schema, ws, 2 + k, day), _rows(dataset.schema, OTHER, 3, day)])
                report_lake.write_day(lake, dataset.name, day, frame)
                expected[f"{dataset.name}/date={day}/part.parquet"] = 2 + k
        else:
            frame = pl.concat([_rows(dataset.schema, ws, 4 + i, None), _rows(dataset.schema, OTHER, 2, None)])
            report_lake.write_table(lake, dataset.name, frame)
            expected[f"{dataset.name}/data.parquet"] = 4 + i
    return expected


def config(s3: S3Export, bucket: str, **extra: Any) -> ValidConfig:
    raw = {
        "endpoint_url": s3.url,
        "bucket": bucket,
        "prefix": "flokit/prod",
        "access_key_id": "testing",
        "secret_access_key": "testing",
        **extra,
    }
    return validate_config("warehouse", raw)


def run(cfg: ValidConfig, target: SyncTarget) -> SyncTarget:
    lines: list[str] = []
    CONNECTOR.sync(CONNECTOR.client(cfg), target, cfg, lines.append)
    return target


def target_for(db: Database, tmp_path: Path, ws: str, state: dict[str, Any] | None = None) -> SyncTarget:
    return SyncTarget(db, LocalLake(tmp_path / "lake"), ws, "int_test", "warehouse", state=state or {})


def test_an_export_lands_every_partition_with_only_the_workspaces_rows(
    db: Database, tmp_path: Path, ws: str, s3: S3Export
) -> None:
    expected = seed(LocalLake(tmp_path / "lake"), ws)
    bucket = s3.new_bucket()
    target = run(config(s3, bucket), target_for(db, tmp_path, ws))

    keys = s3.keys(bucket)
    assert keys == sorted(f"flokit/prod/{key}" for key in expected)
    for key, rows in expected.items():
        frame = s3.read(bucket, f"flokit/prod/{key}")
        assert frame.height == rows, key
        assert frame["workspace_id"].unique().to_list() == [ws], key
    assert target.records == sum(expected.values())
    assert target.earliest == datetime(2026, 6, 1, tzinfo=UTC)
    # The columns and types are the lake's.
    events = s3.read(bucket, f"flokit/prod/canonical_events/date={START}/part.parquet")
    assert events.schema == pl.Schema(report_lake.SCHEMAS[report_lake.CANONICAL_EVENTS])


def test_a_second_sync_with_nothing_new_exports_nothing(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    seed(LocalLake(tmp_path / "lake"), ws)
    bucket = s3.new_bucket()
    first = run(config(s3, bucket), target_for(db, tmp_path, ws))
    stamps = {key: s3.client().head_object(Bucket=bucket, Key=key)["LastModified"] for key in s3.keys(bucket)}
    # An object the customer removed stays removed: nothing is sent again while the lake is unchanged.
    s3.client().delete_object(Bucket=bucket, Key="flokit/prod/ltv/data.parquet")

    second = run(config(s3, bucket), target_for(db, tmp_path, ws, first.state))

    assert second.records == 0
    assert len(s3.keys(bucket)) == len(stamps) - 1
    assert all(s3.client().head_object(Bucket=bucket, Key=k)["LastModified"] == stamps[k] for k in s3.keys(bucket))


def test_a_changed_day_is_rewritten_whole_and_nothing_else(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    lake = LocalLake(tmp_path / "lake")
    seed(lake, ws)
    bucket = s3.new_bucket()
    first = run(config(s3, bucket), target_for(db, tmp_path, ws))
    day = START + timedelta(days=2)
    path = lake.partition_path(report_lake.CANONICAL_EVENTS, day)
    old = pl.read_parquet(path)
    mine = old.filter(pl.col("workspace_id") == ws)
    late = mine.head(1).with_columns(
        event_id=pl.lit("late-event"), occurred_at=pl.col("occurred_at") + timedelta(minutes=1)
    )
    # One of this workspace's events is gone (a replayed day), a late one arrived.
    new = pl.concat([old.filter(pl.col("event_id") != mine["event_id"][0]), late])
    lake.write(new, path)

    second = run(config(s3, bucket), target_for(db, tmp_path, ws, first.state))

    exported = s3.read(bucket, f"flokit/prod/canonical_events/date={day}/part.parquet")
    assert second.records == mine.height
    assert sorted(exported["event_id"].to_list()) == sorted(new.filter(pl.col("workspace_id") == ws)["event_id"])
    assert "late-event" in exported["event_id"].to_list()
    assert mine["event_id"][0] not in exported["event_id"].to_list()


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/export.py, integrations/target.py")
def test_another_workspaces_change_sends_nothing(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    lake = LocalLake(tmp_path / "lake")
    seed(lake, ws)
    bucket = s3.new_bucket()
    first = run(config(s3, bucket), target_for(db, tmp_path, ws))
    path = lake.partition_path(report_lake.PAYBACK_DAILY, START)
    old = pl.read_parquet(path)
    lake.write(pl.concat([old, _rows(report_lake.SCHEMAS[report_lake.PAYBACK_DAILY], OTHER, 7, START, salt=9)]), path)
    report_lake.write_table(
        lake, report_lake.LTV, pl.read_parquet(lake.table_path(report_lake.LTV))
    )  # same rows, new mtime

    second = run(config(s3, bucket), target_for(db, tmp_path, ws, first.state))

    assert second.records == 0
    # The new mtimes are remembered: the next sync does not read those files again.
    assert second.state["exported"]["payback_daily"][START.isoformat()][0] == path.stat().st_mtime_ns


def test_a_day_whose_rows_are_gone_is_removed(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    lake = LocalLake(tmp_path / "lake")
    seed(lake, ws)
    bucket = s3.new_bucket()
    first = run(config(s3, bucket), target_for(db, tmp_path, ws))
    path = lake.partition_path(report_lake.COHORT_ACTIVITY, START)
    lake.write(pl.read_parquet(path).filter(pl.col("workspace_id") != ws), path)

    run(config(s3, bucket), target_for(db, tmp_path, ws, first.state))

    assert f"flokit/prod/cohort_activity/date={START}/part.parquet" not in s3.keys(bucket)
    assert f"flokit/prod/cohort_activity/date={START + timedelta(days=1)}/part.parquet" in s3.keys(bucket)


def test_an_empty_lake_exports_nothing_and_the_check_says_so(
    db: Database, tmp_path: Path, ws: str, s3: S3Export
) -> None:
    bucket = s3.new_bucket()
    cfg = config(s3, bucket)
    target = run(cfg, target_for(db, tmp_path, ws))
    assert target.records == 0 and s3.keys(bucket) == []
    assert CONNECTOR.check(CONNECTOR.client(cfg)) == f"s3://{bucket}/flokit/prod is readable (empty)"


def test_refused_credentials_are_auth_with_s3s_message(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    seed(LocalLake(tmp_path / "lake"), ws)
    bucket = s3.new_bucket()
    key, secret = s3.iam_user()
    with authenticating():
        unknown = config(s3, bucket, access_key_id="AKIAUNKNOWN000000000")
        with pytest.raises(ClientError) as refused:
            CONNECTOR.check(CONNECTOR.client(unknown))
        assert refused.value.code == "auth"
        assert "InvalidAccessKeyId: The AWS Access Key Id you provided does not exist in our records." in (
            refused.value.message
        )

        wrong = config(s3, bucket, access_key_id=key, secret_access_key="not-the-secret")
        target = target_for(db, tmp_path, ws)
        with pytest.raises(ClientError) as refused:
            run(wrong, target)
        assert refused.value.code == "auth" and refused.value.status == 403
        assert "SignatureDoesNotMatch: The request signature we calculated does not match" in refused.value.message
    assert target.records == 0 and s3.keys(bucket) == []

    with authenticating():
        right = config(s3, bucket, access_key_id=key, secret_access_key=secret)
        assert run(right, target_for(db, tmp_path, ws)).records > 0


def test_a_missing_bucket_is_config(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    seed(LocalLake(tmp_path / "lake"), ws)
    cfg = config(s3, "no-such-bucket-here")
    for call in (lambda: CONNECTOR.check(CONNECTOR.client(cfg)), lambda: run(cfg, target_for(db, tmp_path, ws))):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.code == "config" and refused.value.refused
        assert "NoSuchBucket: The specified bucket does not exist" in refused.value.message


# --- throttling and server errors: an S3 endpoint answering S3's XML errors -------------------

_EMPTY_LISTING = (
    '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    "<Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount><MaxKeys>1</MaxKeys><IsTruncated>false</IsTruncated>"
    "</ListBucketResult>"
)


def _s3_error(status: int, code: str, message: str) -> Response:
    body = f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>r1</RequestId></Error>"
    return Response(body, status=status, content_type="application/xml")


@pytest.fixture
def s3_errors() -> Iterator[HTTPServer]:
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    yield server
    server.clear()
    server.stop()


def _flaky_client(server: HTTPServer) -> WarehouseExportClient:
    return WarehouseExportClient(
        base_url=server.url_for("").rstrip("/"),
        bucket="b",
        access_key_id="testing",
        secret_access_key="testing",
        retry_attempts=2,
    )


def test_a_5xx_then_success_is_retried(s3_errors: HTTPServer) -> None:
    calls: list[str] = []
    lock = threading.Lock()

    def handler(request: Request) -> Response:
        with lock:
            calls.append(request.path)
            first = len(calls) == 1
        if first:
            return _s3_error(500, "InternalError", "We encountered an internal error. Please try again.")
        return Response(_EMPTY_LISTING, content_type="application/xml")

    s3_errors.expect_request("/b").respond_with_handler(handler)
    assert CONNECTOR.check(_flaky_client(s3_errors)) == "s3://b/ is readable (empty)"
    assert len(calls) == 2


def test_throttling_beyond_the_retries_is_rate_limited(s3_errors: HTTPServer) -> None:
    s3_errors.expect_request("/b").respond_with_response(_s3_error(503, "SlowDown", "Please reduce your request rate."))
    with pytest.raises(ClientError) as failed:
        CONNECTOR.check(_flaky_client(s3_errors))
    assert failed.value.code == "rate_limited" and not failed.value.refused
    assert "SlowDown: Please reduce your request rate." in failed.value.message


def test_an_unreachable_endpoint_is_a_provider_error() -> None:
    server = HTTPServer(host="127.0.0.1", port=0)
    server.start()
    url = server.url_for("").rstrip("/")
    server.stop()  # nothing listens there any more
    client = WarehouseExportClient(
        base_url=url, bucket="b", access_key_id="k", secret_access_key="s", retry_attempts=1, connect_timeout_s=1
    )
    with pytest.raises(ClientError) as failed:
        CONNECTOR.check(client)
    assert failed.value.code == "provider_error"


# --- Snowflake (fakesnow: Snowflake's SQL over DuckDB, in memory for one patch) ----------------

SNOWFLAKE = {
    "snowflake_account": "acme-xy12345",
    "snowflake_user": "FLOKIT",
    "snowflake_password": "s3cret-password",
    "snowflake_database": "ANALYTICS",
    "snowflake_schema": "FLOKIT",
    "snowflake_warehouse": "LOADING",
}

# fakesnow reads every result through DuckDB's DB-API Arrow path, which this DuckDB warns about
# (an extra copy); the warning is the fake's, not ours.
_FAKESNOW_WARNS = pytest.mark.filterwarnings("ignore:Arrow output on a DB-API result:UserWarning")


def _snowflake_counts(ws: str) -> dict[str, int]:
    """Rows of the workspace per table, read through a connection of its own."""
    conn = snowflake.connector.connect(
        account="acme-xy12345", user="ANALYST", password="x", database="ANALYTICS", schema="FLOKIT"
    )
    try:
        cursor = conn.cursor()
        return {
            d.name: cursor.execute(f"SELECT COUNT(*) FROM {d.name} WHERE workspace_id = %s", (ws,)).fetchone()[0]  # noqa: S608
            for d in EXPORTED
        }
    finally:
        conn.close()


@_FAKESNOW_WARNS
def test_snowflake_tables_hold_the_rows_and_a_reexport_does_not_duplicate(
    db: Database, tmp_path: Path, ws: str, s3: S3Export
) -> None:
    lake = LocalLake(tmp_path / "lake")
    expected = seed(lake, ws)
    bucket = s3.new_bucket()
    cfg = config(s3, bucket, **SNOWFLAKE)
    per_table = {d.name: sum(n for k, n in expected.items() if k.split("/")[0] == d.name) for d in EXPORTED}
    with fakesnow.patch():
        assert "Snowflake" in CONNECTOR.check(CONNECTOR.client(cfg))
        first = run(cfg, target_for(db, tmp_path, ws))
        assert _snowflake_counts(ws) == per_table

        # A day re-exported (one more row of ours) and a whole table rewritten with other figures.
        path = lake.partition_path(report_lake.PAYBACK_DAILY, START)
        schema = report_lake.SCHEMAS[report_lake.PAYBACK_DAILY]
        lake.write(pl.concat([pl.read_parquet(path), _rows(schema, ws, 1, START, salt=50)]), path)
        ltv = pl.read_parquet(lake.table_path(report_lake.LTV))
        report_lake.write_table(lake, report_lake.LTV, ltv.with_columns(ltv_projected=pl.col("ltv_projected") * 2))
        second = run(cfg, target_for(db, tmp_path, ws, first.state))

        assert second.records == expected[f"payback_daily/date={START}/part.parquet"] + 1 + per_table[report_lake.LTV]
        counts = _snowflake_counts(ws)
        assert counts == {**per_table, report_lake.PAYBACK_DAILY: per_table[report_lake.PAYBACK_DAILY] + 1}
        conn = snowflake.connector.connect(account="a", user="u", password="p", database="ANALYTICS", schema="FLOKIT")
        try:
            doubled = conn.cursor().execute("SELECT SUM(ltv_projected) FROM ltv WHERE workspace_id = %s", (ws,))
            assert doubled.fetchone()[0] == pytest.approx(
                2 * ltv.filter(pl.col("workspace_id") == ws)["ltv_projected"].sum()
            )
            day = conn.cursor().execute(
                "SELECT COUNT(*) FROM payback_daily WHERE workspace_id = %s AND partition_date = %s", (ws, START)
            )
            assert day.fetchone()[0] == expected[f"payback_daily/date={START}/part.parquet"] + 1
        finally:
            conn.close()


@_FAKESNOW_WARNS
def test_snowflake_rows_of_another_workspace_are_left_alone(
    db: Database, tmp_path: Path, ws: str, s3: S3Export
) -> None:
    seed(LocalLake(tmp_path / "lake"), ws)
    cfg = config(s3, s3.new_bucket(), **SNOWFLAKE)
    with fakesnow.patch():
        run(cfg, target_for(db, tmp_path, ws))
        run(config(s3, s3.new_bucket(), **SNOWFLAKE), target_for(db, tmp_path, OTHER))
        mine, theirs = _snowflake_counts(ws), _snowflake_counts(OTHER)
        assert mine[report_lake.LTV] > 0 and theirs[report_lake.LTV] == 2
        assert theirs[report_lake.CANONICAL_EVENTS] > 0 and mine[report_lake.CANONICAL_EVENTS] > 0


# --- Snowflake's login refusals: the real connector against its login endpoint on 127.0.0.1 ----


def _snowflake_login(server: HTTPServer, answer: Response) -> None:
    """Snowflake's login-request endpoint (POST /session/v1/login-request), as the connector calls it."""
    server.expect_request("/session/v1/login-request", method="POST").respond_with_response(answer)


def test_a_refused_snowflake_login_is_auth_with_snowflakes_message(
    db: Database, tmp_path: Path, ws: str, s3: S3Export, s3_errors: HTTPServer
) -> None:
    seed(LocalLake(tmp_path / "lake"), ws)
    refusal = {
        "data": {"nextAction": None, "authnMethod": "USERNAME_PASSWORD"},
        "code": "390100",
        "message": "Incorrect username or password was specified.",
        "success": False,
    }
    _snowflake_login(s3_errors, Response(json.dumps(refusal), content_type="application/json"))
    bucket = s3.new_bucket()
    cfg = config(s3, bucket, **SNOWFLAKE, snowflake_url=s3_errors.url_for("").rstrip("/"))
    for call in (lambda: CONNECTOR.check(CONNECTOR.client(cfg)), lambda: run(cfg, target_for(db, tmp_path, ws))):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.code == "auth"
        assert "Incorrect username or password was specified." in refused.value.message
    assert s3.keys(bucket) == []  # the login comes before anything is sent


def test_an_unknown_snowflake_account_is_config(s3: S3Export, s3_errors: HTTPServer) -> None:
    _snowflake_login(s3_errors, Response("Forbidden", status=403))
    cfg = config(s3, s3.new_bucket(), **SNOWFLAKE, snowflake_url=s3_errors.url_for("").rstrip("/"))
    with pytest.raises(ClientError) as refused:
        CONNECTOR.check(CONNECTOR.client(cfg))
    assert refused.value.code == "config"
    assert "Verify the account name is correct" in refused.value.message


def test_a_new_destination_gets_every_partition(db: Database, tmp_path: Path, ws: str, s3: S3Export) -> None:
    expected = seed(LocalLake(tmp_path / "lake"), ws)
    first = run(config(s3, s3.new_bucket()), target_for(db, tmp_path, ws))
    moved = s3.new_bucket()
    second = run(config(s3, moved), target_for(db, tmp_path, ws, first.state))
    assert len(s3.keys(moved)) == len(expected)
    assert second.records == first.records


def test_a_server_error_beyond_the_retries_is_a_provider_error(s3_errors: HTTPServer) -> None:
    s3_errors.expect_request("/b").respond_with_response(
        _s3_error(503, "ServiceUnavailable", "Service is unable to handle request.")
    )
    with pytest.raises(ClientError) as failed:
        CONNECTOR.check(_flaky_client(s3_errors))
    assert failed.value.code == "provider_error" and failed.value.status == 503
    assert "ServiceUnavailable: Service is unable to handle request." in failed.value.message
