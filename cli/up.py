"""`flokit up`: migrate, bootstrap a demo workspace when empty, run API + Dagster UI + daemon.

The three servers run as child processes in their own sessions, so a terminal's Ctrl-C reaches
only this supervisor, which then stops them in order and waits for each. If any child dies on
its own, the others are stopped too: a half-running service is worse than a stopped one.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

import click

from cli.context import load_settings, open_database
from cli.demo import UP_DAYS, UP_SEED, UP_USERS, seed_workspace
from warehouse import migrate, workspaces
from warehouse.actions.demo import seed_demo_actions
from warehouse.bootstrap import bootstrap
from warehouse.lake import Lake
from warehouse.settings import APP_SESSION_SECRET_FILE, Settings

ROOT = Path(__file__).resolve().parents[1]
DEV_INSTANCE = ROOT / "orchestration" / "instance" / "dagster.dev.yaml"
# Gunicorn workers: two per core is the usual sizing for I/O-bound Flask on this 2-core class.
DEFAULT_WORKERS = 4
# How long each child gets to finish in-flight work after SIGTERM before it is killed.
STOP_GRACE_S = 20.0
ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms "%(a)s"'


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen[bytes] | None = None


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"flokit up: {name} not found; run `make up` to install the environment")
    return found


def ensure_dagster_home(settings: Settings) -> Path:
    settings.dagster_home.mkdir(parents=True, exist_ok=True)
    config = settings.dagster_home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(DEV_INSTANCE, config)
    return config


def ensure_app_session_secret(settings: Settings) -> Settings:
    """App-session tokens work out of the box: without FLOKIT_APP_SESSION_SECRET, a random secret
    is created once in the data directory (owner-only) and kept across restarts."""
    if settings.app_session_secret:
        return settings
    path = settings.data_dir / APP_SESSION_SECRET_FILE
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(48) + "\n")
    return replace(settings, app_session_secret=path.read_text().strip())


def children(settings: Settings, workers: int) -> list[Child]:
    workspace = str(ROOT / "workspace.yaml")
    return [
        Child(
            "api",
            [
                _tool("gunicorn"),
                "--bind",
                f"127.0.0.1:{settings.api_port}",
                "--workers",
                str(workers),
                "--graceful-timeout",
                "15",
                "--access-logfile",
                "-",
                # The default format logs the request line with its query string, where ingest
                # vendors send their shared `secret`; log the path only (%(U)s), never secrets.
                "--access-logformat",
                ACCESS_LOG_FORMAT,
                "--error-logfile",
                "-",
                "api.app:create_app()",
            ],
        ),
        Child(
            "dagster-webserver",
            [_tool("dagster-webserver"), "-h", "127.0.0.1", "-p", str(settings.dagster_port), "-w", workspace],
        ),
        Child("dagster-daemon", [_tool("dagster-daemon"), "run", "-w", workspace]),
    ]


def print_first_run(result: dict[str, str]) -> None:
    click.echo("Created the demo workspace. These keys are shown once; keep them:")
    for field, value in result.items():
        click.echo(f"  {field:<20} {value}")


@click.command()
@click.option("--no-bootstrap", is_flag=True, help="Do not create a demo workspace in an empty database.")
@click.option("--workers", type=int, default=DEFAULT_WORKERS, show_default=True, help="Gunicorn workers.")
def up(no_bootstrap: bool, workers: int) -> None:
    """Run the whole service until Ctrl-C."""
    settings = load_settings()
    database = open_database(settings)
    applied = migrate.upgrade(database)
    click.echo(f"database {settings.database_url.split('@')[-1]} at revision {', '.join(applied)}")
    if not no_bootstrap:
        with database.write() as conn:
            created = None
            if not workspaces.count_workspaces(conn):
                created = bootstrap(conn, name="Demo workspace", actor="flokit up")
                seed_demo_actions(conn, workspace_id=created["workspace_id"])
        if created:
            print_first_run(created)
            seeded = seed_workspace(
                database, Lake(settings.lake_dir), created["workspace_id"], UP_USERS, UP_DAYS, UP_SEED
            )
            click.echo(
                f"Seeded a demo history: {seeded['written']} events, {seeded['first_day']}..{seeded['last_day']}"
            )
    database.dispose()  # children open their own connections; keep none across the fork
    ensure_dagster_home(settings)
    settings = ensure_app_session_secret(settings)
    env = {**os.environ, **settings.child_env()}
    raise SystemExit(supervise(children(settings, workers), env, settings))


def supervise(procs: list[Child], env: dict[str, str], settings: Settings) -> int:
    stopping = False

    def _stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)

    for child in procs:
        child.process = subprocess.Popen(child.argv, cwd=ROOT, env=env, start_new_session=True)
    click.echo(
        f"API (v1, gateway, ingest)  http://127.0.0.1:{settings.api_port}   surfaces: {','.join(settings.surfaces)}"
    )
    click.echo(f"Dagster UI                 http://127.0.0.1:{settings.dagster_port}")
    click.echo(f"Dagster daemon             DAGSTER_HOME={settings.dagster_home}")
    click.echo(f"DuckDB catalog             {settings.catalog_path}")
    click.echo("Press Ctrl-C to stop.")

    status = 0
    while not stopping:
        for child in procs:
            assert child.process is not None
            if child.process.poll() is not None:
                click.echo(f"{child.name} exited with {child.process.returncode}; stopping the others", err=True)
                status, stopping = 1, True
                break
        else:
            time.sleep(0.5)

    click.echo("stopping...")
    for child in procs:
        if child.process and child.process.poll() is None:
            os.killpg(child.process.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in procs:
        if child.process is None:
            continue
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            click.echo(f"{child.name} did not stop in {STOP_GRACE_S:.0f}s; killing it", err=True)
            os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait()
        # Its own children too (a Dagster run the daemon launched, gunicorn workers): they got the
        # SIGTERM with the group and finish their step; nothing of FloKit outlives `flokit up`.
        if not _group_gone(child.process.pid, deadline):
            click.echo(f"processes of {child.name} did not stop in {STOP_GRACE_S:.0f}s; killing them", err=True)
            _kill_group(child.process.pid)
    click.echo("stopped.")
    return status


def _group_gone(pgid: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
