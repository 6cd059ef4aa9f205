"""`flokit up` as an operator runs it, for the e2e and fault tests: free ports, a fresh data
directory, its log in a file, its children found with psutil, and the Dagster webserver asked
over GraphQL what it loaded."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import psutil
import requests

from tests.support import BIN, ROOT, free_port, wait_for
from tests.support.cli import Ran, flokit_in_process

READY_QUERY = """
{
  workspaceOrError {
    ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename } } }
  }
  instance { daemonHealth { allDaemonStatuses { daemonType healthy } } }
}
"""


@dataclass
class Up:
    process: subprocess.Popen[str]
    log_path: Path
    data_dir: Path
    api: str
    ui: str
    seen: list[psutil.Process] = field(default_factory=list)  # every descendant ever looked at

    def output(self) -> str:
        """What `flokit up` printed on its console (stdout and stderr)."""
        return self.log_path.read_text(errors="replace")

    def log(self, child: str) -> str:
        """The full log of one child (`api`, `dagster-webserver`, `dagster-daemon`) in the data directory."""
        path = self.data_dir / "logs" / f"{child}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def child(self, name: str) -> psutil.Process | None:
        """The direct child whose command line names `name` (gunicorn, dagster-daemon, ...)."""
        for kid in psutil.Process(self.process.pid).children():
            try:
                if any(Path(part).name == name for part in kid.cmdline()[:2]):
                    return kid
            except psutil.NoSuchProcess:
                continue
        return None

    def remember_descendants(self) -> None:
        self.seen.extend(psutil.Process(self.process.pid).children(recursive=True))

    def left_behind(self) -> list[psutil.Process]:
        """Descendants seen during the test that still run after `flokit up` ended."""
        left = []
        for kid in self.seen:
            try:
                if kid.is_running() and kid.status() != psutil.STATUS_ZOMBIE:
                    left.append(kid)
            except psutil.NoSuchProcess:
                continue
        return left

    def wait_for_log(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {text!r} in:\n{self.output()[-4000:]}")
            if self.process.poll() is not None and text not in self.output():
                raise AssertionError(f"flokit up exited with {self.process.returncode}:\n{self.output()[-4000:]}")
            time.sleep(0.2)

    def stop(self, signum: signal.Signals = signal.SIGTERM, timeout: float = 90) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        return self.process.wait(timeout=timeout)


@contextmanager
def flokit_up(
    data_dir: Path,
    *args: str,
    log_name: str = "up.log",
    env: dict[str, str] | None = None,
    bootstrap: bool = False,
) -> Iterator[Up]:
    """`flokit up --no-bootstrap --workers 1 *args` on free ports with FLOKIT_DATA_DIR=data_dir
    and `env` on top (e.g. FLOKIT_DATABASE_URL; SQLite in data_dir without it); stopped with
    SIGTERM (and waited for) on exit if still running. With `bootstrap`, without --no-bootstrap:
    an empty database gets the demo workspace and its history, as on a newcomer's first start."""
    api_port, ui_port = free_port(), free_port()
    extra = env or {}
    env = {
        **os.environ,
        "FLOKIT_DATA_DIR": str(data_dir),
        "FLOKIT_API_PORT": str(api_port),
        "FLOKIT_DAGSTER_PORT": str(ui_port),
    }
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_DATABASE_URL", None)
    env.update(extra)
    # A file, not a pipe: nobody reads a pipe until the end, and a full pipe blocks every child.
    log_path = data_dir.parent / log_name
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(BIN / "flokit"), "up", *([] if bootstrap else ["--no-bootstrap"]), "--workers", "1", *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        up = Up(process, log_path, data_dir, f"http://127.0.0.1:{api_port}", f"http://127.0.0.1:{ui_port}")
        try:
            yield up
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=90)


def build_world(data_dir: Path) -> Path:
    """A data directory as a restarted `flokit up` finds it: its SQLite database migrated with
    its instance key (`flokit db upgrade`), and the Dagster instance created and at head in
    `data_dir/dagster` (what `flokit up` does before starting the servers). Built once per
    worker, so a test whose point is not the first start does not pay for creating them."""
    done = run_flokit(data_dir, "db", "upgrade")
    assert done.returncode == 0, done.stderr
    from cli.dagster_instance import prepare_instance  # deferred: importing Dagster costs seconds

    prepare_instance(data_dir / "dagster")
    return data_dir


def copy_world(world: Path, data_dir: Path) -> Path:
    """A copy of `build_world`'s directory at `data_dir`, file by file with their modes (0700,
    0600): the test's `flokit up` finds the database and the instance at head and migrates none."""
    shutil.copytree(world, data_dir, symlinks=True)
    return data_dir


def run_flokit(data_dir: Path, *args: str) -> Ran:
    env = {**os.environ, "FLOKIT_DATA_DIR": str(data_dir)}
    env.pop("DAGSTER_HOME", None)
    env.pop("FLOKIT_DATABASE_URL", None)
    return flokit_in_process(env, *args)


def dagster_ready(ui: str) -> bool:
    """The webserver loaded the `flokit` location without error and the daemon's sensor loop is
    healthy (it heartbeats): sensors will tick."""
    answer = requests.post(f"{ui}/graphql", json={"query": READY_QUERY}, timeout=5).json()["data"]
    entries = answer["workspaceOrError"].get("locationEntries") or []
    loaded = any(
        (e["name"], e["loadStatus"], e["locationOrLoadError"]["__typename"])
        == ("flokit", "LOADED", "RepositoryLocation")
        for e in entries
    )
    statuses = answer["instance"]["daemonHealth"]["allDaemonStatuses"]
    return loaded and any(s["daemonType"] == "SENSOR" and s["healthy"] for s in statuses)


def alembic_rows(dagster_home: Path) -> dict[str, list[str]]:
    """Each SQLite storage of the instance and the rows of its alembic_version table."""
    rows = {}
    for path in sorted(dagster_home.rglob("*.db")):
        con = sqlite3.connect(path)
        try:
            rows[str(path.relative_to(dagster_home))] = [r[0] for r in con.execute("SELECT * FROM alembic_version")]
        except sqlite3.OperationalError:
            pass
        finally:
            con.close()
    return rows


def assert_daemon_brings_the_demo_to_reports_and_catalog(base: str, key: str, data_dir: Path) -> None:
    """Nobody runs `flokit refresh`: the daemon's sensors take the landed demo history into the
    lake (canonical_events_sensor), publish the first reports once every landed event is in the
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
