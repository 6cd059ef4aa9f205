"""`flokit up`: migrate, bootstrap a demo workspace when empty, run API + Dagster UI + daemon.

Before any child starts, the Dagster instance is created and migrated here, once
(`cli.dagster_instance`): Dagster processes initialising a new SQLite instance at the same time
can damage it for good. A damaged instance is refused with the repair to run.

The three servers run as child processes in their own sessions, so a terminal's Ctrl-C reaches
only this supervisor, which then stops them in order and waits for each. A child that dies is
restarted with backoff while the others keep running (`cli.supervisor`); a crash loop, a code
location that does not load, Ctrl-C or SIGTERM stop everything.

The console shows the banner, the addresses and one line per meaningful event (`cli.console`);
each child's full output goes to `<data_dir>/logs/<child>.log`, and with `--verbose` to the
console as well.
"""

from __future__ import annotations

import getpass
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from cli.admin import login_url
from cli.console import LogRotation, RunWatch, warnings_to
from cli.context import App, pass_app
from cli.dagster_instance import RUNNING_LOCK, InstanceBusy, InstanceDamaged, holding, prepare_instance
from cli.db import ensure_signing_root, seal_webhook_secrets, secure_data_dir, warn_if_not_durable
from cli.demo import UP_DAYS, UP_SEED, UP_USERS, instance_key, seed_workspace
from cli.location import LocationWatch
from cli.supervisor import Child, RestartPolicy, Supervisor, stop_requested
from transforms import dashboard_auth
from warehouse import migrate, workspaces
from warehouse.bootstrap import bootstrap
from warehouse.dashboard import sessions
from warehouse.instance_key import ensure_instance_key
from warehouse.settings import APP_SESSION_SECRET_FILE, DATA_DIR_MODE, Settings

ROOT = Path(__file__).resolve().parents[1]
# Gunicorn workers: two per core is the usual sizing for I/O-bound Flask on this 2-core class.
DEFAULT_WORKERS = 4
# How long each child gets to finish in-flight work after SIGTERM before it is killed.
STOP_GRACE_S = 20.0
# Who bootstraps the demo workspace (its audit actor, and how later starts find it again).
UP_ACTOR = "flokit up"
# The dashboard link's operator when the local login name does not make an address.
UP_OPERATOR = "operator@localhost"
ACCESS_LOG_FORMAT = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(b)s %(M)sms "%(a)s"'


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise SystemExit(f"flokit up: {name} not found; run `make up` to install the environment")
    return found


def ensure_app_session_secret(settings: Settings) -> Settings:
    """App-session tokens work out of the box: without FLOKIT_APP_SESSION_SECRET, a random secret
    is created once in the data directory (owner-only) and kept across restarts."""
    if settings.app_session_secret:
        return settings
    path = settings.data_dir / APP_SESSION_SECRET_FILE
    settings.data_dir.mkdir(mode=DATA_DIR_MODE, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_urlsafe(48) + "\n")
    return replace(settings, app_session_secret=path.read_text().strip())


def children(settings: Settings, workers: int, host: str = "127.0.0.1") -> list[Child]:
    """The three servers, each writing its full output to `<data_dir>/logs/<name>.log`, listening
    on `host` (`flokit serve` picks one of them and may listen beyond loopback)."""
    workspace = str(ROOT / "workspace.yaml")
    logs = settings.paths.logs
    return [
        Child(
            "api",
            [
                _tool("gunicorn"),
                # Request limits and JSON answers for the requests gunicorn refuses itself.
                "--config",
                str(ROOT / "api" / "gunicorn_conf.py"),
                "--bind",
                f"{host}:{settings.api_port}",
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
            logs / "api.log",
            # A master killed with SIGKILL leaves workers holding the port; nothing will reap them.
            orphan_grace_s=0.0,
        ),
        Child(
            "dagster-webserver",
            [_tool("dagster-webserver"), "-h", host, "-p", str(settings.dagster_port), "-w", workspace],
            logs / "dagster-webserver.log",
        ),
        Child("dagster-daemon", [_tool("dagster-daemon"), "run", "-w", workspace], logs / "dagster-daemon.log"),
    ]


def print_first_run(result: dict[str, str]) -> None:
    click.echo("Created the demo workspace. These keys are shown once; keep them:")
    for field, value in result.items():
        click.echo(f"  {field:<20} {value}")


def demo_queue(settings: Settings, env: dict[str, str], workspace_id: str) -> None:
    """The demo's queue, before the servers start: a first `flokit refresh` (the reports and the
    engine's proposals), then `flokit demo walkthrough` (a shift run, a pause run and rolled back,
    an offer test rejected, all on the sandbox account), so the newcomer's first look shows every
    status for real. Child processes, so this process never loads Dagster; their output goes to
    `<logs>/demo-bootstrap.log`. A failure is reported and the service starts anyway (the daemon
    refreshes on its schedule)."""
    log = settings.paths.logs / "demo-bootstrap.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    steps = (["refresh", "--json"], ["demo", "walkthrough", "--workspace", workspace_id, "--json"])
    with log.open("a") as out:
        for args in steps:
            done = subprocess.run([_tool("flokit"), *args], env=env, capture_output=True, text=True, check=False)
            out.write(f"$ flokit {' '.join(args)}\n{done.stderr}{done.stdout}\n")
            if done.returncode != 0:
                click.echo(f"flokit up: `flokit {' '.join(args)}` failed (see {log}); starting anyway", err=True)
                return
    click.echo(
        f"Demo queue: first refresh and walkthrough on the sandbox account in {time.monotonic() - started:.0f} s"
    )
    for step in json.loads(done.stdout)["steps"]:
        if step["action_id"]:
            click.echo(f"  {step['action_type']:<15} {step['action_id']}  {step['status']}")


@click.command()
@click.option("--no-bootstrap", is_flag=True, help="Do not create a demo workspace in an empty database.")
@click.option("--workers", type=int, default=DEFAULT_WORKERS, show_default=True, help="Gunicorn workers.")
@click.option(
    "--verbose", is_flag=True, help="Show the servers' full logs here too (they always go to <data dir>/logs/)."
)
@pass_app
def up(app: App, no_bootstrap: bool, workers: int, verbose: bool) -> None:
    """Run the whole service until Ctrl-C."""
    settings = app.settings
    secure_data_dir(settings)  # before anything creates the directory with the umask's mode
    if not verbose:  # Dagster's warnings when this process opens the instance
        warnings_to(settings.paths.logs / "flokit-up.log")
    try:
        with holding(settings.dagster_home, RUNNING_LOCK, wait=False):
            raise SystemExit(_up(app, no_bootstrap, workers, verbose))
    except InstanceBusy as exc:
        raise SystemExit(f"flokit up: {exc}; stop it first (one flokit up per data directory)") from exc


def _up(app: App, no_bootstrap: bool, workers: int, verbose: bool) -> int:
    settings = app.settings
    try:
        done = prepare_instance(settings.dagster_home, settings)
    except InstanceDamaged as exc:
        click.echo(f"flokit up: {exc}", err=True)
        return 1
    click.echo(f"dagster instance {settings.dagster_home}: {', '.join(done)}")
    database = app.database
    applied = migrate.upgrade(database)
    click.echo(f"database {settings.database_url.split('@')[-1]} at revision {', '.join(applied)}")
    if instance_key(settings):  # created as `flokit db upgrade` would; signing secrets are sealed with it
        seal_webhook_secrets(settings, database)
        ensure_signing_root(settings, database)
    warn_if_not_durable(database)
    created = None
    if not no_bootstrap:
        with database.write() as conn:
            if not workspaces.count_workspaces(conn):
                created = bootstrap(conn, name="Demo workspace", actor=UP_ACTOR)
        if created:
            print_first_run(created)
            # The demo queue is the engine's: its first refresh (the daemon's first reports, then
            # `actions_engine_sensor`) proposes from this history, sized on the sandbox account.
            seeded = seed_workspace(
                database,
                settings.paths.lake(),
                created["workspace_id"],
                UP_USERS,
                UP_DAYS,
                UP_SEED,
                sandbox_key=instance_key(settings),
            )
            click.echo(
                f"Seeded a demo history: {seeded['written']} events, {seeded['first_day']}..{seeded['last_day']}"
            )
    link = dashboard_link(app, settings)
    app.close()  # children open their own connections; keep none across the fork
    settings = ensure_app_session_secret(settings)
    env = {**os.environ, **settings.child_env()}
    if created:
        demo_queue(settings, env, created["workspace_id"])
    return supervise(children(settings, workers), env, settings, verbose, link)


def dashboard_link(app: App, settings: Settings) -> str | None:
    """A fresh one-time dashboard link for the demo workspace (the one `flokit up` bootstrapped, or
    the only one), signing in as the local user (`<login name>@localhost`), as Jupyter prints its
    token URL at every start. None when the dashboard is not served or no workspace is chosen."""
    if "dashboard" not in settings.surfaces:
        return None
    ensure_instance_key(settings)  # the workers sign the dashboard's cookie with a key derived from it
    try:
        operator = dashboard_auth.operator_email(f"{getpass.getuser()}@localhost")
    except (dashboard_auth.InvalidValue, OSError, KeyError):
        operator = UP_OPERATOR
    with app.database.write() as conn:
        workspace_id = sessions.started_workspace(conn, UP_ACTOR)
        if workspace_id is None:
            return None
        token = sessions.create_login_token(conn, operator=operator, workspace_id=workspace_id, actor=UP_ACTOR)
    return login_url(settings, token)


def supervise(
    procs: list[Child], env: dict[str, str], settings: Settings, verbose: bool = False, link: str | None = None
) -> int:
    """Run the children until Ctrl-C/SIGTERM (0) or a reason to stop everything (1, printed)."""
    stopping = stop_requested()

    supervisor = Supervisor(procs, env, ROOT, RestartPolicy(), STOP_GRACE_S, echo=verbose)
    supervisor.start_all()
    click.echo(
        f"API (v1, gateway, ingest)  http://127.0.0.1:{settings.api_port}   surfaces: {','.join(settings.surfaces)}"
    )
    if link:
        ttl = int(dashboard_auth.DEFAULT_LINK_TTL.total_seconds() // 60)
        click.echo(f"Dashboard (one-time link)  {link}")
        click.echo(
            f"                           open it, press Sign in; works once, for {ttl} min;"
            " later: flokit admin login-link --as EMAIL"
        )
    click.echo(f"Dagster UI                 http://127.0.0.1:{settings.dagster_port}")
    click.echo(f"Dagster daemon             DAGSTER_HOME={settings.dagster_home}")
    click.echo(f"DuckDB catalog             {settings.paths.catalog_location()}")
    shown = "also shown here" if verbose else "flokit up --verbose shows them here too"
    click.echo(f"Logs                       {settings.paths.logs}/ ({shown})")
    click.echo("Press Ctrl-C to stop.")

    ui = f"http://127.0.0.1:{settings.dagster_port}"
    location = LocationWatch(ui, started_at=time.monotonic())
    runs = RunWatch(settings.dagster_home, ui, settings.paths.logs / "dagster-daemon.log")
    rotation = LogRotation([c.log_path for c in procs if c.log_path is not None])
    try:
        reason = supervisor.run(stopping, [location, runs, rotation])
    finally:
        runs.close()
    if reason:
        click.echo(f"flokit up: {reason}", err=True)
    click.echo("stopping...")
    supervisor.stop_all()
    click.echo("stopped." if not reason else f"stopped: {reason}")
    return 1 if reason else 0
