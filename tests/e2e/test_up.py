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
from tests.support.up import run_flokit
from warehouse import workspaces
from warehouse.db import Database

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_up_runs_everything_and_stops_cleanly(up_data_dir: Path, tmp_path: Path, stop_signal: signal.Signals) -> None:
    """An operator's restart (a migrated database with a workspace, `flokit admin bootstrap`'s):
    no demo is created and no keys are printed, and either signal stops every child. A newcomer's
    first start (the demo, its keys, the daemon taking it to reports and the catalog) is
    tests/e2e/test_up_console.py's."""
    data = up_data_dir
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
        # Generous: under `make test` another worker loads the same two cores (no figure here is a target).
        wait_for(http_ok(f"http://127.0.0.1:{api_port}/healthz"), 180, "API", proc)
        wait_for(http_ok(f"http://127.0.0.1:{ui_port}/server_info"), 120, "Dagster UI", proc)
        kids = psutil.Process(proc.pid).children(recursive=True)
        names = " ".join(" ".join(k.cmdline()) for k in kids)
        assert "gunicorn" in names and "dagster-webserver" in names and "dagster-daemon" in names
        assert (data / "dagster" / "dagster.yaml").exists()
        assert requests.get(f"http://127.0.0.1:{api_port}/v1/workspace", timeout=5).status_code == 401
        assert_a_read_key_answers(f"http://127.0.0.1:{api_port}", data / "flokit.db")
    finally:
        proc.send_signal(stop_signal)
        proc.wait(timeout=60)
        log.close()
    output = log_path.read_text()
    assert proc.returncode == 0, output[-3000:]
    # The operator's workspace is kept as it is: no demo, no keys shown.
    assert "api_key_read_write" not in output and "Seeded a demo history" not in output, output[-3000:]
    assert f"http://127.0.0.1:{api_port}" in output and f"http://127.0.0.1:{ui_port}" in output
    assert "stopped." in output
    assert not [k for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def assert_a_read_key_answers(base: str, sqlite_path: Path) -> None:
    """A read-only key made for the workspace in the database is accepted by the running API."""
    db = Database(f"sqlite:///{sqlite_path}")
    try:
        with db.write() as conn:
            [workspace_id] = [row[0] for row in conn.exec_driver_sql("SELECT id FROM workspaces")]
            key = workspaces.create_key(conn, workspace_id=workspace_id, scope="read_only").api_key
    finally:
        db.dispose()
    r = requests.get(f"{base}/v1/actions?limit=100", headers={"Authorization": f"Bearer {key}"}, timeout=5)
    assert r.status_code == 200, r.text
