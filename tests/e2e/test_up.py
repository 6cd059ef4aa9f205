"""`flokit up` starts API, Dagster UI and daemon, and stops all of them on SIGTERM/SIGINT."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import requests

from tests.support import ROOT, free_port, http_ok, wait_for
from warehouse import workspaces
from warehouse.db import Database

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_up_runs_everything_and_stops_cleanly(tmp_path: Path, stop_signal: signal.Signals) -> None:
    api_port, ui_port = free_port(), free_port()
    env = {
        **os.environ,
        "FLOKIT_DATA_DIR": str(tmp_path / "data"),
        "FLOKIT_API_PORT": str(api_port),
        "FLOKIT_DAGSTER_PORT": str(ui_port),
    }
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_DATABASE_URL", None)
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "flokit"), "up", "--workers", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(http_ok(f"http://127.0.0.1:{api_port}/healthz"), 60, "API", proc)
        wait_for(http_ok(f"http://127.0.0.1:{ui_port}/server_info"), 120, "Dagster UI", proc)
        kids = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(k.cmdline()) for k in kids)
        assert "gunicorn" in names and "dagster-webserver" in names and "dagster-daemon" in names
        assert (tmp_path / "data" / "dagster" / "dagster.yaml").exists()
        assert requests.get(f"http://127.0.0.1:{api_port}/v1/workspace", timeout=5).status_code == 401
        assert_demo_queue_is_listed(f"http://127.0.0.1:{api_port}", tmp_path / "data" / "flokit.db")
    finally:
        proc.send_signal(stop_signal)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-3000:]
    assert "api_key_read_write" in output  # demo workspace keys printed once on first run
    assert f"http://127.0.0.1:{api_port}" in output and f"http://127.0.0.1:{ui_port}" in output
    assert "stopped." in output
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def assert_demo_queue_is_listed(base: str, sqlite_path: Path) -> None:
    """A newcomer's first GET /v1/actions shows the demo queue in several statuses."""
    db = Database(f"sqlite:///{sqlite_path}")
    try:
        with db.write() as conn:
            [workspace_id] = [row[0] for row in conn.exec_driver_sql("SELECT id FROM workspaces")]
            key = workspaces.create_key(conn, workspace_id=workspace_id, scope="read_only").api_key
    finally:
        db.dispose()
    r = requests.get(f"{base}/v1/actions?limit=100", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert r.status_code == 200
    statuses = {a["status"] for a in r.json()["actions"]}
    assert statuses == {"draft", "ready", "approved", "running", "completed", "rejected", "rolled_back"}
