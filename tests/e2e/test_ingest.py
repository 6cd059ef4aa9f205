"""Ingest as it runs in production: gunicorn with the ingest surface, real HTTP, `flokit` commands
(in-process, `tests.support.cli`), the DuckDB catalog read by an analyst's read-only connection."""

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import requests

from tests.support import ROOT, free_port, gunicorn_server, http_ok, wait_for
from tests.support.cli import Ran, flokit_in_process
from tests.support.ingest import PATH, VENDOR, callback, counts
from warehouse.db import Database
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e


@pytest.fixture
def ingest_server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    env = {**os.environ, **settings.child_env(), "FLOKIT_SURFACES": "ingest"}
    with gunicorn_server(env, workers=4, log_dir=tmp_path) as server:
        yield server.base


def flokit(settings: Settings, *args: str) -> Ran:
    env = {**os.environ, **settings.child_env()}
    return flokit_in_process(env, *args)


@pytest.mark.both_backends(reason="a race: eight concurrent writers against each backend's unique constraint")
def test_eight_concurrent_identical_callbacks_write_one_event(
    ingest_server: str, workspace: dict, db: Database
) -> None:
    barrier = threading.Barrier(8)
    answers: list[dict] = []

    def deliver() -> None:
        barrier.wait()
        r = requests.get(ingest_server + PATH, params=callback(workspace), timeout=30)
        assert r.status_code == 200
        answers.append(r.json())

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(a["written"] for a in answers) == [0] * 7 + [1]
    assert sum(a["duplicate"] for a in answers) == 7
    assert counts(db) == (1, 1)


def test_callbacks_over_http_reach_the_analyst_catalog(ingest_server: str, workspace: dict, settings: Settings) -> None:
    # Half the installs name their campaign and creative the way the vendor's callback placeholders
    # do (the tracker's parts for the creative), the rest are organic.
    attributed = {"campaign_name": "spring_us", "tracker_name": "Meta::spring_us::broad::video_1"}
    sent = [
        callback(
            workspace,
            adid=f"dev-{i}",
            user_id=f"u-{i}",
            created_at=f"2026-11-{18 + i % 3}T12:00:00Z",
            **(attributed if i % 2 == 0 else {}),
        )
        for i in range(6)
    ]
    for params in sent:
        assert requests.get(ingest_server + PATH, params=params, timeout=10).json()["written"] == 1
    # A redelivery (POST form this time) and an unmapped event: neither reaches the lake.
    assert requests.post(ingest_server + PATH, data=sent[0], timeout=10).json()["duplicate"] == 1
    unmapped = callback(workspace, event_token="nope", activity_kind="event")
    assert requests.get(ingest_server + PATH, params=unmapped, timeout=10).json()["dropped"] == 1

    result = flokit(settings, "refresh", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] and [(r["name"], r["partitions"]) for r in report["runs"]] == [
        ("canonical_events", "2026-11-18..2026-11-20"),
        ("reports", "2026-11-18..2026-11-20"),
        ("actions_engine", None),
        ("analyst_catalog", None),
    ]
    assert "materializing canonical_events [2026-11-18..2026-11-20]" in result.stderr
    catalog = settings.data_dir / "warehouse.duckdb"
    with duckdb.connect(str(catalog), read_only=True) as con:
        rows = con.execute(
            "SELECT adid, event_type, platform, country, source FROM canonical_events ORDER BY adid"
        ).fetchall()
        # The reports group those installs by the campaign and creative the callbacks named.
        installs = con.execute(
            "SELECT dimension, value, sum(installs)::INT FROM payback WHERE dimension IN ('campaign', 'creative') "
            "GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
    assert rows == [(f"dev-{i}", "install", "ios", "US", VENDOR) for i in range(6)]
    assert installs == [
        ("campaign", "organic", 3),
        ("campaign", "spring_us", 3),
        ("creative", "(none)", 3),
        ("creative", "video_1", 3),
    ]
    # The runs are in the instance at DAGSTER_HOME (what the Dagster UI shows).
    assert (settings.dagster_home / "dagster.yaml").exists()
    assert any((settings.dagster_home / "storage").iterdir())


def test_refresh_exits_non_zero_when_a_run_fails(ingest_server: str, workspace: dict, settings: Settings) -> None:
    requests.get(ingest_server + PATH, params=callback(workspace), timeout=10)
    blocker = settings.data_dir / "lake" / "canonical_events"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("a file where the dataset directory belongs")  # a real write failure
    result = flokit(settings, "refresh")
    assert result.returncode == 1
    assert "FAILED" in result.stdout and "refresh failed" in result.stdout


def test_admin_ingest_commands(settings: Settings, ingest_server: str) -> None:
    boot = json.loads(flokit(settings, "admin", "bootstrap", "--name", "Cli", "--json").stdout)
    assert {"ingest_vendor", "ingest_secret", "ingest_app_token"} <= set(boot)
    assert boot["ingest_vendor"] == VENDOR
    ws = boot["workspace_id"]
    # The default mapping: install callbacks are accepted right after bootstrap.
    assert requests.get(ingest_server + PATH, params=callback(boot), timeout=10).json()["written"] == 1

    mapped = flokit(
        settings, "admin", "ingest", "map", "--workspace", ws, "--vendor", VENDOR, "--token", "tr1",
        "--event-type", "trial_start", "--json",
    )  # fmt: skip
    assert mapped.returncode == 0, mapped.stderr
    assert json.loads(mapped.stdout)["mappings"] == {"activity_kind:install": "install", "tr1": "trial_start"}
    cb = callback(boot, event_token="tr1", activity_kind="event")
    assert requests.get(ingest_server + PATH, params=cb, timeout=10).json()["written"] == 1
    bad = flokit(settings, "admin", "ingest", "map", "--workspace", ws, "--vendor", "nope", "--token", "x",
                 "--event-type", "install")  # fmt: skip
    assert bad.returncode == 1 and "unknown vendor" in bad.stderr

    listed = flokit(settings, "admin", "ingest", "allowlist", "--vendor", VENDOR, "--add", "192.0.2.0/24", "--json")
    assert json.loads(listed.stdout) == {"vendor": VENDOR, "allowlist": ["192.0.2.0/24"]}
    r = requests.get(ingest_server + PATH, params=callback(boot, adid="blocked"), timeout=10)
    assert r.status_code == 401 and r.json() == {"error": "Unverified callback."}
    flokit(settings, "admin", "ingest", "allowlist", "--vendor", VENDOR, "--remove", "192.0.2.0/24")
    assert requests.get(ingest_server + PATH, params=callback(boot, adid="open"), timeout=10).status_code == 200

    rotated = json.loads(
        flokit(
            settings,
            "admin",
            "ingest",
            "credentials",
            "--vendor",
            VENDOR,
            "--rotate",
            "--app-token",
            boot["ingest_app_token"],
            "--json",
        ).stdout
    )
    assert requests.get(ingest_server + PATH, params=callback(boot, adid="r"), timeout=10).status_code == 401
    assert requests.get(ingest_server + PATH, params=callback(rotated, adid="r"), timeout=10).status_code == 200
    again = flokit(settings, "admin", "ingest", "credentials", "--workspace", ws, "--vendor", VENDOR,
                   "--app-token", boot["ingest_app_token"])  # fmt: skip
    assert again.returncode == 1 and "already registered" in again.stderr


def test_production_access_logs_never_contain_the_secret(settings: Settings, workspace: dict, tmp_path: Path) -> None:
    """gunicorn as `flokit up` starts it logs the path of a callback, not its query string."""
    from cli.up import DEFAULT_WORKERS, children

    port = free_port()
    run_settings = Settings(data_dir=settings.data_dir, database_url=settings.database_url, api_port=port)
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            children(run_settings, DEFAULT_WORKERS)[0].argv,
            cwd=ROOT,
            env={**os.environ, **run_settings.child_env()},
            stdout=sink,
            stderr=sink,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(http_ok(f"{base}/healthz"), 30, "gunicorn /healthz", proc)
            assert requests.get(base + PATH, params=callback(workspace), timeout=10).json()["written"] == 1
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert f"GET {PATH} HTTP/1.1" in text
    assert workspace["ingest_secret"] not in text
