"""`flokit up` starts API, Dagster UI and daemon, and stops all of them on SIGTERM/SIGINT."""

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import psutil
import pytest
import requests

from tests.support import ROOT, free_port, http_ok, wait_for
from tests.up_support import run_flokit
from warehouse import workspaces
from warehouse.db import Database

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_up_runs_everything_and_stops_cleanly(
    tmp_path: Path, stop_signal: signal.Signals, request: pytest.FixtureRequest
) -> None:
    """SIGINT on a newcomer's first start (an empty data directory: the demo is created and the
    daemon takes it to reports); SIGTERM on an operator's restart (a migrated database with a
    workspace, `flokit admin bootstrap`'s), where no demo is created and no keys are printed."""
    first_start = stop_signal == signal.SIGINT
    data = tmp_path / "data"
    if not first_start:
        data = request.getfixturevalue("up_data_dir")
        done = run_flokit(data, "admin", "bootstrap", "--name", "Acme")
        assert done.returncode == 0, done.stderr
    api_port, ui_port = free_port(), free_port()
    env = {
        **os.environ,
        "FLOKIT_DATA_DIR": str(data),
        "FLOKIT_API_PORT": str(api_port),
        "FLOKIT_DAGSTER_PORT": str(ui_port),
    }
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_DATABASE_URL", None)
    # A file, not a pipe: nobody reads a pipe until the end, and once its 64 KB buffer is full
    # every child writing its log (the daemon, gunicorn's access log) would block.
    log_path = tmp_path / "up.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "flokit"), "up", "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # Generous: the first start seeds the demo workspace before the API listens, and under
        # `make test` another worker loads the same two cores (no figure here is a target).
        wait_for(http_ok(f"http://127.0.0.1:{api_port}/healthz"), 180, "API", proc)
        wait_for(http_ok(f"http://127.0.0.1:{ui_port}/server_info"), 120, "Dagster UI", proc)
        kids = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(k.cmdline()) for k in kids)
        assert "gunicorn" in names and "dagster-webserver" in names and "dagster-daemon" in names
        assert (data / "dagster" / "dagster.yaml").exists()
        assert requests.get(f"http://127.0.0.1:{api_port}/v1/workspace", timeout=5).status_code == 401
        key = demo_read_key(f"http://127.0.0.1:{api_port}", data / "flokit.db")
        if first_start:  # once is enough: the daemon's pipeline takes a minute
            assert_daemon_brings_the_demo_to_reports_and_catalog(f"http://127.0.0.1:{api_port}", key, data)
    finally:
        proc.send_signal(stop_signal)
        proc.wait(timeout=60)
        log.close()
    output = log_path.read_text()
    assert proc.returncode == 0, output[-3000:]
    if first_start:
        assert "api_key_read_write" in output  # demo workspace keys printed once on first run
    else:  # the operator's workspace is kept as it is: no demo, no keys shown
        assert "api_key_read_write" not in output and "Seeded a demo history" not in output, output[-3000:]
    assert f"http://127.0.0.1:{api_port}" in output and f"http://127.0.0.1:{ui_port}" in output
    assert "stopped." in output
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def demo_read_key(base: str, sqlite_path: Path) -> str:
    """A read-only key of the demo workspace. Its action queue is the engine's: nothing is in it
    before the daemon's first reports (no action is drawn at random any more)."""
    db = Database(f"sqlite:///{sqlite_path}")
    try:
        with db.write() as conn:
            [workspace_id] = [row[0] for row in conn.exec_driver_sql("SELECT id FROM workspaces")]
            key = workspaces.create_key(conn, workspace_id=workspace_id, scope="read_only").api_key
    finally:
        db.dispose()
    r = requests.get(f"{base}/v1/actions?limit=100", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert r.status_code == 200
    return key


def assert_daemon_brings_the_demo_to_reports_and_catalog(base: str, key: str, data_dir: Path) -> None:
    """Nobody runs `flokit refresh`: the daemon's sensors take the landed demo history into the
    lake (landed_events_sensor), publish the first reports once every landed event is in the
    lake (reports_first_refresh) and build the analyst catalog (analyst_catalog_sensor)."""
    today = datetime.now(UTC).date()
    query = {"start_date": (today - timedelta(days=90)).isoformat(), "end_date": today.isoformat()}

    def reports_answer() -> bool:
        r = requests.get(
            f"{base}/v1/reports/payback", params=query, headers={"Authorization": f"Bearer {key}"}, timeout=5
        )
        return r.status_code == 200 and len(r.json()["data"]) > 0

    wait_for(reports_answer, 300, "the first reports from the daemon")
    catalog = data_dir / "warehouse.duckdb"

    def catalog_has_payback() -> bool:
        if not catalog.exists():
            return False
        with duckdb.connect(str(catalog), read_only=True) as con:
            return con.execute("SELECT count(*) FROM payback").fetchone()[0] > 0

    wait_for(catalog_has_payback, 120, "the analyst catalog with the reports")

    def engine_queue() -> bool:  # actions_engine_sensor runs the engine on the signals just written
        r = requests.get(f"{base}/v1/actions?limit=100", headers={"Authorization": f"Bearer {key}"}, timeout=5)
        return r.status_code == 200 and {"budget_shift", "creative_pause"} <= {a["type"] for a in r.json()["actions"]}

    wait_for(engine_queue, 180, "the engine's demo queue (a budget shift and a creative pause)")
    with duckdb.connect(str(catalog), read_only=True) as con:
        assert con.execute("SELECT count(DISTINCT occurred_at::DATE) FROM canonical_events").fetchone()[0] >= 60
