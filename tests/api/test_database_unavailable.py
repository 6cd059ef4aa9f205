"""An unavailable operational database answers 503 with Retry-After on every surface, not 500.

Real databases only: PostgreSQL on a port where nothing listens (connection refused), or with
its backends terminated; SQLite whose file cannot be opened, or whose write lock another
connection holds past the busy timeout. A genuine bug (a missing table, a duplicate key) stays
a 500 with its traceback logged. Outage log lines are rate limited, without tracebacks.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from flask import Flask
from flask.testing import FlaskClient

import api.logs
import warehouse.db
from api.app import create_app
from api.context import state
from tests.support import bearer, free_port
from tests.support.databases import fresh_database_url
from tests.support.ingest import PATH, callback, counts
from warehouse.bootstrap import bootstrap
from warehouse.db import close_database, database_for
from warehouse.settings import Settings
from warehouse.tables import workspaces

pytestmark = pytest.mark.both_backends(
    reason="each backend fails its own way: PostgreSQL refused or terminated, SQLite unopenable or locked"
)

V1_EVENT = {"event": "purchase", "user_id": "u-1", "timestamp": "2026-11-20T18:04:05Z"}


def unreachable_url(settings: Settings, tmp_path: Path) -> str:
    """The backend's "database gone": PostgreSQL on a closed port (connection refused); a SQLite
    path that cannot be opened (a directory stands where the file should be: an unmounted or
    replaced volume)."""
    if settings.is_sqlite:
        path = tmp_path / "gone" / "flokit.db"
        path.mkdir(parents=True)
        return f"sqlite:///{path}"
    head, _, tail = settings.database_url.rpartition("@")
    return f"{head}@127.0.0.1:{free_port()}/{tail.partition('/')[2]}"


@pytest.fixture
def down(settings: Settings, tmp_path: Path) -> Iterator[FlaskClient]:
    """A client of an app whose operational database is unavailable from the start."""
    url = unreachable_url(settings, tmp_path)
    yield create_app(dataclasses.replace(settings, database_url=url)).test_client()
    close_database(url)


def assert_v1_503(r) -> None:
    assert r.status_code == 503, r.get_data(as_text=True)
    assert r.headers["Retry-After"] == "5"
    assert r.content_type == "application/json"
    assert set(r.json) == {"error", "message"} and r.json["error"] == "service_unavailable" and r.json["message"]
    assert r.headers["X-Request-Id"]


def assert_gateway_503(r) -> None:
    assert r.status_code == 503, r.get_data(as_text=True)
    assert r.headers["Retry-After"] == "5"
    assert r.content_type == "application/json"
    assert r.json == {"error": "Service Unavailable"}


def settings_on(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings on a fresh database of one backend, dropped after the test."""
    gen = fresh_database_url(request, backend, tmp_path)
    url = next(gen)
    yield Settings(data_dir=tmp_path / "data", database_url=url)
    next(gen, None)


@pytest.fixture
def sqlite_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    yield from settings_on("sqlite", request, tmp_path)


@pytest.fixture
def postgres_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    yield from settings_on("postgres", request, tmp_path)


def test_every_surface_answers_503_with_retry_after(down: FlaskClient) -> None:
    assert_v1_503(down.get("/v1/workspace", headers=bearer("flk_whatever")))
    assert_v1_503(down.post("/v1/events", json=V1_EVENT, headers=bearer("flk_whatever")))
    app_headers = {"x-app-key": "pk_whatever", "x-user-id": "u-1"}
    assert_gateway_503(down.get("/api/entitlements/current", headers=app_headers))
    assert_gateway_503(down.post("/api/paywall/events", json={"events": []}, headers=app_headers))
    assert_gateway_503(down.get(PATH, query_string={"app_token": "tok", "secret": "s"}))
    assert_gateway_503(down.post(PATH, data={"app_token": "tok", "secret": "s"}))


def test_readyz_is_503_while_the_database_is_unavailable_and_healthz_stays_200(down: FlaskClient) -> None:
    r = down.get("/readyz")
    assert r.status_code == 503 and r.headers["Retry-After"] == "5"
    assert r.json["status"] == "unavailable" and r.json["reason"]
    assert down.get("/healthz").json == {"status": "ok"}


def test_readyz_is_200_when_the_database_answers(client: FlaskClient) -> None:
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json == {"status": "ok"}
    assert "Retry-After" not in r.headers


def test_readyz_on_every_surface_alone_and_in_the_document(settings: Settings) -> None:
    for surfaces in (("v1",), ("gateway",), ("ingest",)):
        c = create_app(dataclasses.replace(settings, surfaces=surfaces)).test_client()
        assert c.get("/readyz").json == {"status": "ok"}
        readyz = c.get("/openapi.json").json["paths"]["/readyz"]["get"]
        assert set(readyz["responses"]) == {"200", "503"} and readyz.get("security") is None


def test_readyz_follows_a_sqlite_file_that_goes_away_and_comes_back(sqlite_settings: Settings) -> None:
    """The volume under the database disappears (the file moved away), then comes back."""
    path = Path(sqlite_settings.database_url.removeprefix("sqlite:///"))
    c = create_app(sqlite_settings).test_client()
    assert c.get("/readyz").status_code == 200
    moved = path.with_name("elsewhere.db")
    path.rename(moved)
    try:
        r = c.get("/readyz")
        assert r.status_code == 503 and r.headers["Retry-After"] == "5" and r.json["status"] == "unavailable"
        assert not path.exists(), "the readiness probe must not create an empty database"
    finally:
        moved.rename(path)
    assert c.get("/readyz").status_code == 200


# --- a SQLite writer that outwaits the busy timeout -----------------------------------------


def test_sqlite_writes_locked_past_the_busy_timeout_answer_503_then_succeed(
    sqlite_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another connection holds SQLite's write lock longer than the busy timeout (shortened
    here from 10 s to 0.3 s, before any connection is opened, so the test takes a second):
    writes answer 503 and keep nothing; once the lock is released the same requests succeed."""
    db = database_for(sqlite_settings.database_url)
    with db.write() as conn:
        ws = bootstrap(conn, name="Locked Inc")
    close_database(sqlite_settings.database_url)  # new connections below take the short timeout
    monkeypatch.setattr(warehouse.db, "SQLITE_BUSY_TIMEOUT_MS", 300)
    c = create_app(sqlite_settings).test_client()
    rw = bearer(ws["api_key_read_write"])

    holder = sqlite3.connect(sqlite_settings.database_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert_gateway_503(c.get(PATH, query_string=callback(ws)))
        assert_v1_503(c.post("/v1/events", json=V1_EVENT, headers=rw))
        assert c.get("/v1/workspace", headers=rw).status_code == 200  # WAL: readers are not blocked
    finally:
        holder.execute("COMMIT")
        holder.close()

    r = c.get(PATH, query_string=callback(ws))
    assert r.status_code == 200 and r.json["written"] == 1  # the 503 kept no claim: written, not duplicate
    assert c.post("/v1/events", json=V1_EVENT, headers=rw).json["status"] == "accepted"
    assert counts(database_for(sqlite_settings.database_url)) == (2, 2)
    close_database(sqlite_settings.database_url)


@pytest.mark.postgres
def test_postgres_connections_terminated_between_requests_are_replaced(
    postgres_settings: Settings, postgres_admin_url: str
) -> None:
    """Every backend of the app terminated (a failover, an operator's pg_terminate_backend):
    the next requests succeed on new connections, without a 5xx and without a restart."""
    db = database_for(postgres_settings.database_url)
    with db.write() as conn:
        ws = bootstrap(conn, name="Terminated Inc")
    c = create_app(postgres_settings).test_client()
    rw = bearer(ws["api_key_read_write"])
    assert c.get(PATH, query_string=callback(ws, adid="a")).status_code == 200
    assert c.get("/v1/workspace", headers=rw).status_code == 200
    name = postgres_settings.database_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_admin_url.replace("+psycopg", ""), autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s", (name,)
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    time.sleep(0.2)  # the server's goodbye reaches the idle sockets
    assert c.get(PATH, query_string=callback(ws, adid="b")).json["written"] == 1
    assert c.get("/v1/workspace", headers=rw).status_code == 200
    assert c.get("/readyz").status_code == 200
    assert counts(db) == (2, 2)


# --- genuine bugs stay 500 -------------------------------------------------------------------


@pytest.fixture
def buggy(settings: Settings) -> Flask:
    app = create_app(settings)

    @app.get("/v1/_probe/missing_table")
    def _missing_table():
        with state().db.read() as conn:
            conn.exec_driver_sql("SELECT * FROM no_such_table")

    @app.get("/_probe/duplicate_key")
    def _duplicate_key():
        row = {"id": "ws_dup", "name": "dup", "created_at": warehouse.db.utcnow()}
        with state().db.write() as conn:
            conn.execute(sa.insert(workspaces), [row, row])

    return app


@pytest.fixture
def flokit_log() -> Iterator[io.StringIO]:
    """What the "flokit" logger writes, in its JSON format (api/logs.py)."""
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.setFormatter(api.logs.JsonFormatter())
    logger = logging.getLogger("flokit")
    logger.addHandler(handler)
    try:
        yield sink
    finally:
        logger.removeHandler(handler)


def lines(sink: io.StringIO, msg: str) -> list[dict]:
    return [entry for entry in map(json.loads, sink.getvalue().splitlines()) if entry["msg"] == msg]


def test_programming_errors_and_integrity_errors_stay_500_with_a_traceback(
    buggy: Flask, flokit_log: io.StringIO
) -> None:
    c = buggy.test_client()
    r = c.get("/v1/_probe/missing_table")
    assert r.status_code == 500 and r.json["error"] == "internal_error" and "Retry-After" not in r.headers
    r = c.get("/_probe/duplicate_key")
    assert r.status_code == 500 and r.json == {"error": "Internal Server Error"}
    logged = lines(flokit_log, "unhandled exception")
    assert len(logged) == 2 and all("Traceback" in entry["exc"] for entry in logged)


# --- logs: one line per kind per interval, no traceback --------------------------------------


def test_outage_log_lines_are_rate_limited_and_count_what_they_suppressed(
    down: FlaskClient, flokit_log: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api.logs, "OUTAGE_LOG_INTERVAL_S", 2.0)
    for _ in range(10):
        assert down.get(PATH, query_string={"app_token": "tok", "secret": "s"}).status_code == 503
    (first,) = lines(flokit_log, "database unavailable")
    assert first["level"] == "warning" and first["suppressed"] == 0 and first["kind"] and first["detail"]
    assert "exc" not in first and first["status"] == 503 and first["path"] == PATH
    time.sleep(2.1)
    assert down.get("/v1/workspace", headers=bearer("flk_x")).status_code == 503
    again, second = lines(flokit_log, "database unavailable")
    assert again == first and second["suppressed"] == 9 and second["kind"] == first["kind"]
    assert not lines(flokit_log, "unhandled exception")
    assert "Traceback" not in flokit_log.getvalue()


# --- the classifier on real driver errors ----------------------------------------------------


def test_real_sqlite_errors_are_classified(tmp_path: Path) -> None:
    from warehouse import availability

    full = sqlite3.connect(tmp_path / "full.db")
    full.execute("CREATE TABLE t (x TEXT)")
    full.execute("PRAGMA max_page_count = 3")
    with pytest.raises(sqlite3.OperationalError) as disk_full:
        full.executemany("INSERT INTO t VALUES (?)", [("x" * 4000,)] * 10)
    assert availability.unavailable(disk_full.value).kind == "disk_full"  # type: ignore[union-attr]
    with pytest.raises(sqlite3.OperationalError) as no_table:
        full.execute("SELECT * FROM missing")
    assert availability.unavailable(no_table.value) is None
    full.execute("CREATE TABLE u (x INTEGER PRIMARY KEY)")
    with pytest.raises(sqlite3.IntegrityError) as integrity:
        full.executemany("INSERT INTO u VALUES (?)", [(1,), (1,)])
    assert availability.unavailable(integrity.value) is None
    full.close()


@pytest.mark.postgres
def test_real_postgres_errors_are_classified(postgres_settings: Settings, postgres_admin_url: str) -> None:
    from warehouse import availability

    dsn = postgres_settings.database_url.replace("+psycopg", "")
    with psycopg.connect(dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(postgres_admin_url.replace("+psycopg", ""), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as terminated:
            victim.execute("SELECT 1")
    assert terminated.value.sqlstate == "57P01"
    assert availability.unavailable(terminated.value).kind == "shutdown"  # type: ignore[union-attr]
    closed_port = dsn.rsplit("@", 1)[0] + f"@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(closed_port, connect_timeout=2)
    assert availability.unavailable(refused.value).kind == "connection"  # type: ignore[union-attr]
    with psycopg.connect(dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable) as undefined:
            conn.execute("SELECT * FROM no_such_table")
        with pytest.raises(psycopg.errors.UniqueViolation) as unique:
            conn.execute("CREATE TEMP TABLE u (x int PRIMARY KEY); INSERT INTO u VALUES (1), (1)")
    assert availability.unavailable(undefined.value) is None
    assert availability.unavailable(unique.value) is None
