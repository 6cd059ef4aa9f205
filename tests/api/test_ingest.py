"""GET|POST /ingest/<vendor> on both databases: outcomes, mapping rules, auth, allowlist, faults."""

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa
from flask.testing import FlaskClient

from api.app import create_app
from tests.support.databases import fresh_database_url
from tests.support.ingest import PATH, VENDOR, callback, clear_landing_fault, counts, inject_landing_fault
from warehouse.bootstrap import bootstrap
from warehouse.db import Database, database_for
from warehouse.events.landing import day_frame
from warehouse.events.tables import landed_events
from warehouse.ingest import repository
from warehouse.settings import Settings

OUTCOME = {"received": 1, "written": 0, "duplicate": 0, "dropped": 0}


def outcome(reason: str | None = None, **kw: int) -> dict[str, int | str]:
    """The spec's outcome; a dropped one also says why (an extra field, ignored by clients)."""
    return {**OUTCOME, **kw} | ({"reason": reason} if reason else {})


def landed(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(landed_events).order_by(landed_events.c.seq))]


def test_install_callback_is_written_then_a_redelivery_is_duplicate(
    client: FlaskClient, workspace: dict, db: Database
) -> None:
    r = client.get(PATH, query_string=callback(workspace))
    assert r.status_code == 200 and r.json == outcome(written=1)
    assert client.get(PATH, query_string=callback(workspace)).json == outcome(duplicate=1)
    assert counts(db) == (1, 1)
    row = landed(db)[0]
    assert row["workspace_id"] == workspace["workspace_id"] and row["event_type"] == "install"
    assert row["source"] == VENDOR


def test_post_takes_form_body_or_query(client: FlaskClient, workspace: dict, db: Database) -> None:
    assert client.post(PATH, data=callback(workspace, adid="form")).json == outcome(written=1)
    assert client.post(PATH, query_string=callback(workspace, adid="query")).json == outcome(written=1)
    assert client.post(PATH, data=callback(workspace, adid="form")).json == outcome(duplicate=1)


def test_mapping_rules_one_to_five(client: FlaskClient, workspace: dict, db: Database) -> None:
    with db.write() as conn:
        repository.set_mapping(
            conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, token="abc123", event_type="trial_start"
        )
    # Rule 1: mapped token written, unmapped token dropped.
    full = callback(
        workspace,
        event_token="abc123",
        activity_kind="event",
        created_at="2026-11-20T08:30:00Z",
        os_name="Android",
        country="de",
        revenue="4.99",
        currency="EUR",
        adid="ad-9",
        idfa="",
        gps_adid="gps-9",
        user_id="u-9",
    )
    assert client.get(PATH, query_string=full).json == outcome(written=1)
    assert client.get(PATH, query_string={**full, "event_token": "nope"}).json == outcome("unmapped_event", dropped=1)
    # Rule 2: missing or invalid created_at dropped.
    assert client.get(PATH, query_string={**full, "created_at": ""}).json == outcome("missing_created_at", dropped=1)
    assert client.get(PATH, query_string={**full, "created_at": "not-a-time"}).json == outcome(
        "invalid_created_at", dropped=1
    )
    (row,) = landed(db)
    assert row["event_type"] == "trial_start"
    assert row["occurred_at"].isoformat() == "2026-11-20T08:30:00+00:00"
    # Rule 3.
    assert (row["platform"], row["country"]) == ("android", "DE")
    # Rule 4.
    assert row["properties"] == {"revenue": 4.99, "currency": "EUR", "event_token": "abc123", "activity_kind": "event"}
    # Rule 5.
    assert (row["adid"], row["idfa"], row["gps_adid"], row["user_id"]) == ("ad-9", None, "gps-9", "u-9")


def test_a_new_mapping_applies_to_the_next_callback(client: FlaskClient, workspace: dict, db: Database) -> None:
    cb = callback(workspace, event_token="late1", activity_kind="event")
    assert client.get(PATH, query_string=cb).json == outcome("unmapped_event", dropped=1)
    with db.write() as conn:
        repository.set_mapping(
            conn, workspace_id=workspace["workspace_id"], vendor=VENDOR, token="late1", event_type="renewal"
        )
    assert client.get(PATH, query_string=cb).json == outcome(written=1)


def test_unknown_vendor_is_404(client: FlaskClient, workspace: dict) -> None:
    r = client.get("/ingest/some_vendor", query_string=callback(workspace))
    assert r.status_code == 404 and r.json == {"error": "Unknown vendor: some_vendor"}


@pytest.mark.parametrize(
    "change",
    [{"secret": "wrong"}, {"secret": ""}, {"app_token": "unknown"}, {"app_token": ""}],
    ids=["wrong-secret", "empty-secret", "unknown-app-token", "no-app-token"],
)
def test_bad_credentials_are_401(client: FlaskClient, workspace: dict, db: Database, change: dict) -> None:
    r = client.get(PATH, query_string=callback(workspace, **change))
    assert r.status_code == 401 and r.json == {"error": "Unverified callback."}
    assert counts(db) == (0, 0)


def test_missing_secret_is_401(client: FlaskClient, workspace: dict) -> None:
    params = callback(workspace)
    del params["secret"]
    assert client.get(PATH, query_string=params).status_code == 401


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: ingest/repository.py, db.py")
def test_a_rotated_secret_stops_working_at_once(client: FlaskClient, workspace: dict, db: Database) -> None:
    assert client.get(PATH, query_string=callback(workspace, adid="a")).status_code == 200
    with db.write() as conn:
        issued = repository.rotate_secret(conn, vendor=VENDOR, app_token=workspace["ingest_app_token"])
    assert client.get(PATH, query_string=callback(workspace, adid="b")).status_code == 401
    assert client.get(PATH, query_string=callback(workspace, adid="b", secret=issued.secret)).json == outcome(written=1)


def test_the_app_token_decides_the_workspace(client: FlaskClient, workspace: dict, db: Database) -> None:
    from warehouse.bootstrap import bootstrap

    with db.write() as conn:
        other = bootstrap(conn, name="Other")
    client.get(PATH, query_string=callback(other))
    assert [r["workspace_id"] for r in landed(db)] == [other["workspace_id"]]
    # The other workspace's secret does not open this workspace's app token.
    assert client.get(PATH, query_string=callback(workspace, secret=other["ingest_secret"])).status_code == 401


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: ingest/repository.py")
def test_allowlist_with_and_without_trusted_proxies(settings: Settings, workspace: dict, db: Database) -> None:
    with db.write() as conn:
        repository.allow(conn, vendor=VENDOR, cidr="203.0.113.0/24")
    direct = create_app(settings).test_client()
    inside = {"REMOTE_ADDR": "203.0.113.7"}
    outside = {"REMOTE_ADDR": "198.51.100.1"}
    assert direct.get(PATH, query_string=callback(workspace, adid="1"), environ_base=inside).status_code == 200
    r = direct.get(PATH, query_string=callback(workspace, adid="2"), environ_base=outside)
    assert r.status_code == 401 and r.json == {"error": "Unverified callback."}
    # Without trusted proxies a forged X-Forwarded-For changes nothing.
    spoof = {"X-Forwarded-For": "203.0.113.7"}
    assert (
        direct.get(PATH, query_string=callback(workspace, adid="3"), environ_base=outside, headers=spoof).status_code
        == 401
    )

    proxied = create_app(Settings(data_dir=settings.data_dir, database_url=settings.database_url, trusted_proxies=1))
    via_lb = {"REMOTE_ADDR": "10.0.0.2"}
    c = proxied.test_client()
    ok = c.get(PATH, query_string=callback(workspace, adid="4"), environ_base=via_lb, headers=spoof)
    assert ok.status_code == 200
    forged = {"X-Forwarded-For": "203.0.113.7, 198.51.100.1"}  # caller-written left entry is not trusted
    assert (
        c.get(PATH, query_string=callback(workspace, adid="5"), environ_base=via_lb, headers=forged).status_code == 401
    )
    with db.write() as conn:
        repository.disallow(conn, vendor=VENDOR, cidr="203.0.113.0/24")
    assert direct.get(PATH, query_string=callback(workspace, adid="6"), environ_base=outside).status_code == 200


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: db.py")
def test_a_failed_write_is_500_and_the_retry_is_written(client: FlaskClient, workspace: dict, db: Database) -> None:
    inject_landing_fault(db)
    r = client.get(PATH, query_string=callback(workspace))
    assert r.status_code == 500 and r.json == {"error": "Internal Server Error"}
    assert counts(db) == (0, 0)  # no claim, no row: nothing half-written
    clear_landing_fault(db)
    assert client.get(PATH, query_string=callback(workspace)).json == outcome(written=1)
    assert client.get(PATH, query_string=callback(workspace)).json == outcome(duplicate=1)
    assert counts(db) == (1, 1)


def test_landed_rows_become_a_day_frame(client: FlaskClient, workspace: dict, db: Database) -> None:
    client.get(PATH, query_string=callback(workspace, created_at="2026-11-20T23:59:59Z"))
    from datetime import date

    with db.read() as conn:
        frame, seqs = day_frame(conn, date(2026, 11, 20))
    assert isinstance(frame, pl.DataFrame) and frame.height == 1 and len(seqs) == 1


def test_a_nul_character_never_reaches_the_database(client: FlaskClient, workspace: dict, db: Database) -> None:
    """PostgreSQL text cannot hold NUL: such a value is no value, never a 500 the vendor retries forever."""
    assert client.get(PATH, query_string=callback(workspace, adid="a\x00b", user_id="u-nul")).json == outcome(written=1)
    assert landed(db)[0]["adid"] is None and landed(db)[0]["user_id"] == "u-nul"
    bad_token = callback(workspace, app_token=workspace["ingest_app_token"] + "\x00")
    r = client.post(PATH, data=bad_token)
    assert r.status_code == 401 and r.json == {"error": "Unverified callback."}
    assert client.get(PATH, query_string=callback(workspace, created_at="1763700000\x00")).json == outcome(
        "missing_created_at", dropped=1
    )


def test_the_callback_is_documented_without_being_validated(client: FlaskClient) -> None:
    doc = client.get("/openapi.json?surface=ingest").json
    get = doc["paths"]["/ingest/{vendor}"]["get"]
    names = {p["name"] for p in get["parameters"]}
    assert {"vendor", "app_token", "event_token", "created_at", "user_id"} <= names and "secret" not in names
    assert get["security"] == [{"ingestSecret": []}]
    assert set(get["responses"]) == {"200", "401", "404", "429", "500", "503"}  # never 400: bad values are dropped


@pytest.fixture
def postgres_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """Settings on a fresh PostgreSQL database alone, for a test with nothing to prove on SQLite:
    no SQLite case is generated (rather than one that always skips)."""
    urls = fresh_database_url(request, "postgres", tmp_path)
    yield Settings(data_dir=tmp_path / "data", database_url=next(urls))
    next(urls, None)  # drops the database


@pytest.mark.postgres
def test_a_connection_the_database_ended_costs_no_callback(postgres_settings: Settings) -> None:
    """The hot path keeps one connection per worker thread between callbacks (no pool checkout,
    no ping). When the server ends it (a restart, an administrator), the next callback notices
    before using it and takes a new one: no callback answers 500 for it. PostgreSQL only: a
    SQLite connection is a file handle in the process, which no server can end."""
    db = database_for(postgres_settings.database_url)
    with db.write() as conn:
        workspace = bootstrap(conn, name="Acme Fitness")
    client = create_app(postgres_settings).test_client()
    assert client.get(PATH, query_string=callback(workspace, adid="before")).json == outcome(written=1)
    with db.read() as conn:
        ended = [
            pid
            for pid, terminated in conn.execute(
                sa.text(
                    "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
            if terminated
        ]
    assert ended  # the callback's pinned connection was among them
    with db.read() as conn:  # terminated sessions leave pg_stat_activity once they have said goodbye
        for _ in range(200):
            alive = conn.execute(
                sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(:pids)"), {"pids": ended}
            ).scalar_one()
            if not alive:
                break
            time.sleep(0.01)
    assert client.get(PATH, query_string=callback(workspace, adid="after")).json == outcome(written=1)
    assert counts(db) == (2, 2)
