"""`flokit serve api|daemon|webserver|worker`: one role of a deployment across hosts (docs/deploy.md).

`flokit up` runs every role on one host; a deployment that outgrows it runs each role where it
fits, as many of each as it needs (one daemon only: Dagster's rule, enforced here with a
PostgreSQL advisory lock). Each role is one supervised child, as in `flokit up`
(`cli.supervisor`: restarted with backoff, a crash loop stops it, its output in
`<data_dir>/logs/<role>.log`), started the way `flokit up` starts it (`cli.up.children`).

Before anything starts, the role prints what it is, where its settings come from and what it
connects to, and refuses with one line (exit 1) a setting that is invalid or a database or
Celery broker it cannot reach; then `ready` once it serves (the API's /healthz, the Dagster UI's
/server_info, a daemon heartbeat in the instance, the worker answering a Celery ping).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit, urlunsplit

import click
import requests

from cli.console import LogRotation
from cli.context import App, pass_app
from cli.dagster_instance import CELERY_QUEUE, InstanceBusy, InstanceDamaged, holding, prepare_instance
from cli.supervisor import Check, Child, RestartPolicy, Supervisor, speak_as, stop_requested
from cli.up import DEFAULT_WORKERS, ROOT, STOP_GRACE_S, _tool, children
from transforms.webhooks.drain_slots import SLOTS
from warehouse.dagster_storage import DaemonLock, reachable
from warehouse.settings import Settings

READY_POLL_S = 1.0
# Re-checked this often: a daemon whose lock session died (the database restarted) takes it again
# or stops, rather than run beside a second daemon that took it meanwhile.
LOCK_CHECK_S = 10.0
DAEMON_FILE_LOCK = ".flokit-daemon.lock"  # the one-daemon rule on SQLite (one host by nature)


def shown(url: str) -> str:
    """A URL fit for a console: its password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def settings_source() -> str:
    named = sorted(k for k in os.environ if k.startswith("FLOKIT_") or k == "DAGSTER_HOME")
    return f"environment ({', '.join(named)})" if named else "environment (no FLOKIT_* variable: the embedded defaults)"


def _refuse(role: str, message: str) -> NoReturn:
    click.echo(f"flokit serve {role}: {message}", err=True)
    raise SystemExit(1)


def preflight(role: str, settings: Settings, *, dagster: bool, broker: bool) -> None:
    """Print the role and its connections; exit 1 with one line when one of them is unreachable."""
    speak_as(f"flokit serve {role}")
    click.echo(f"role: {role}")
    click.echo(f"settings: {settings_source()}")
    click.echo(f"database: {shown(settings.database_url)}")
    if not settings.is_sqlite:
        why = reachable(settings.database_url)
        if why:
            _refuse(role, f"the database {shown(settings.database_url)} is unreachable: {why}")
    if dagster:
        where = shown(settings.dagster_database_url) if settings.dagster_database_url else "SQLite"
        click.echo(f"dagster instance: {settings.dagster_home} ({where}); run launcher: {settings.run_launcher}")
        if settings.dagster_database_url and settings.dagster_database_url != settings.database_url:
            why = reachable(settings.dagster_database_url)
            if why:
                _refuse(role, f"the Dagster database {shown(settings.dagster_database_url)} is unreachable: {why}")
    if broker and settings.celery is not None:
        click.echo(f"celery broker: {shown(settings.celery.broker_url)}; results: {shown(settings.celery.result_url)}")
        why = _redis_unreachable(settings.celery.broker_url)
        if why:
            _refuse(role, f"the Celery broker {shown(settings.celery.broker_url)} is unreachable: {why}")


def _redis_unreachable(url: str) -> str | None:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    finally:
        client.close()
    return None


def _prepare(role: str, settings: Settings) -> None:
    try:
        done = prepare_instance(settings.dagster_home, settings)
    except InstanceDamaged as exc:
        _refuse(role, str(exc))
    click.echo(f"dagster instance: {', '.join(done)}")


class Ready:
    """Prints `ready` once `probe()` says the role serves (probed in a thread, every second)."""

    def __init__(self, probe: Callable[[], bool]) -> None:
        self.done = threading.Event()
        threading.Thread(target=self._watch, args=(probe,), name="ready", daemon=True).start()

    def _watch(self, probe: Callable[[], bool]) -> None:
        while not self.done.is_set():
            try:
                if probe():
                    click.echo("ready")
                    self.done.set()
                    return
            except Exception:  # noqa: S110  (not up yet: connection refused, no heartbeat, no pong)
                pass
            time.sleep(READY_POLL_S)


def http_ok(url: str) -> Callable[[], bool]:
    return lambda: requests.get(url, timeout=2).status_code == 200


def supervise(role: str, child: Child, settings: Settings, ready: Callable[[], bool], checks: list[Check]) -> int:
    """Run the role's child until Ctrl-C/SIGTERM (0) or a reason to stop (1, printed)."""
    stopping = stop_requested()
    env = {**os.environ, **settings.child_env()}
    supervisor = Supervisor([child], env, ROOT, RestartPolicy(), STOP_GRACE_S)
    supervisor.start_all()
    click.echo(f"log: {child.log_path}")
    probe = Ready(ready)
    rotation = LogRotation([child.log_path] if child.log_path else [])
    try:
        reason = supervisor.run(stopping, [*checks, rotation])
    finally:
        probe.done.set()
    if reason:
        click.echo(f"flokit serve {role}: {reason}", err=True)
    supervisor.stop_all()
    click.echo("stopped." if not reason else f"stopped: {reason}")
    return 1 if reason else 0


def _pick(settings: Settings, name: str, host: str, workers: int = 1) -> Child:
    return next(c for c in children(settings, workers, host) if c.name == name)


@click.group()
def serve() -> None:
    """Run one role of a deployment across hosts (docs/deploy.md); `flokit up` runs them all here."""


host_option = click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")


@serve.command()
@click.option("--port", type=int, help="Listen here instead of FLOKIT_API_PORT.")
@host_option
@click.option("--workers", type=int, default=DEFAULT_WORKERS, show_default=True, help="Gunicorn workers.")
@pass_app
def api(app: App, port: int | None, host: str, workers: int) -> None:
    """The HTTP API (v1, gateway, ingest, processor, dashboard) under gunicorn."""
    settings = replace(app.settings, api_port=port or app.settings.api_port)
    preflight("api", settings, dagster=False, broker=False)
    click.echo(f"listening: http://{host}:{settings.api_port}")
    app.close()
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104  (comparing, not binding)
    child = _pick(settings, "api", host, workers)
    raise SystemExit(supervise("api", child, settings, http_ok(f"http://{local}:{settings.api_port}/healthz"), []))


@serve.command()
@click.option("--port", type=int, help="Listen here instead of FLOKIT_DAGSTER_PORT.")
@host_option
@pass_app
def webserver(app: App, port: int | None, host: str) -> None:
    """The Dagster UI (any number of replicas)."""
    settings = replace(app.settings, dagster_port=port or app.settings.dagster_port)
    preflight("webserver", settings, dagster=True, broker=False)
    _prepare("webserver", settings)
    click.echo(f"listening: http://{host}:{settings.dagster_port}")
    app.close()
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104  (comparing, not binding)
    child = _pick(settings, "dagster-webserver", host)
    ready = http_ok(f"http://{local}:{settings.dagster_port}/server_info")
    raise SystemExit(supervise("webserver", child, settings, ready, []))


@serve.command()
@pass_app
def daemon(app: App) -> None:
    """The Dagster daemon: sensors, schedules, the run queue, run monitoring. One per deployment."""
    settings = app.settings
    preflight("daemon", settings, dagster=True, broker=True)
    _prepare("daemon", settings)
    app.close()
    child = _pick(settings, "dagster-daemon", "127.0.0.1")
    url = settings.dagster_database_url
    if url is None:
        try:
            with holding(settings.dagster_home, DAEMON_FILE_LOCK, wait=False):
                raise SystemExit(supervise("daemon", child, settings, _heartbeat(settings), []))
        except InstanceBusy as exc:
            _refuse("daemon", f"another daemon runs on this instance: {exc}")
    lock = DaemonLock(url)
    if not lock.acquire():
        _refuse("daemon", "another `flokit serve daemon` holds this deployment (one daemon per deployment)")
    click.echo("daemon lock: held (pg_try_advisory_lock)")
    try:
        raise SystemExit(supervise("daemon", child, settings, _heartbeat(settings), [_keep(lock)]))
    finally:
        lock.release()


def _keep(lock: DaemonLock) -> Check:
    last = time.monotonic()

    def check(now: float) -> str | None:
        nonlocal last
        if now - last < LOCK_CHECK_S:
            return None
        last = now
        if lock.alive():
            return None
        lock.release()
        return None if lock.acquire() else "lost the daemon lock and another daemon took it"

    return check


def _heartbeat(settings: Settings) -> Callable[[], bool]:
    """A daemon heartbeat in the instance newer than this start."""
    since = time.time()

    def probe() -> bool:
        import dagster as dg  # deferred: loading Dagster costs seconds

        with dg.DagsterInstance.from_config(str(settings.dagster_home)) as instance:
            return any(beat.timestamp >= since for beat in instance.get_daemon_heartbeats().values())

    return probe


@serve.command()
@click.option("--name", default="worker", show_default=True, help="Celery node name (NAME@host); unique per host.")
@click.option(
    "--concurrency",
    "-c",
    type=int,
    default=2,
    show_default=True,
    help="Runs at once (pool processes), besides room for the two long-lived webhook drain runs.",
)
@pass_app
def worker(app: App, name: str, concurrency: int) -> None:
    """A Celery run worker: each Dagster run the daemon launches runs in one of its pool processes."""
    settings = app.settings
    if settings.celery is None:
        _refuse("worker", "FLOKIT_RUN_LAUNCHER is local: set FLOKIT_RUN_LAUNCHER=celery and FLOKIT_CELERY_BROKER_URL")
    preflight("worker", settings, dagster=True, broker=True)
    _prepare("worker", settings)
    app.close()
    node = f"{name}@{socket.gethostname()}"
    # The long-lived webhook drain runs (one per slot, FLOKIT_WEBHOOK_DRAIN_LIFETIME_S) each hold
    # a pool process for their lifetime, and both may land on this worker: room is made for
    # them on top of `-c`, so the other runs keep `-c` processes on every worker.
    drains = len(SLOTS) if settings.webhook_drain_lifetime_s > 0 else 0
    pool = concurrency + drains
    click.echo(
        f"celery node: {node}; queue: {CELERY_QUEUE}; pool: prefork x {pool}"
        + (f" ({concurrency} + {drains} for the webhook drains)" if drains else "")
    )
    child = Child(
        "worker",
        [
            _tool("celery"),
            "-A",
            "orchestration.celery_app",
            "worker",
            "-Q",
            CELERY_QUEUE,
            "-n",
            node,
            "-c",
            str(pool),
            "-P",
            "prefork",
            "--loglevel",
            "INFO",
            "--without-mingle",
            "--without-gossip",
        ],
        Path(settings.paths.logs) / f"worker-{name}.log",
    )
    raise SystemExit(supervise("worker", child, settings, _pong(settings, node), []))


def _pong(settings: Settings, node: str) -> Callable[[], bool]:
    assert settings.celery is not None
    broker = settings.celery.broker_url

    def probe() -> bool:
        from celery import Celery

        client = Celery("flokit-serve", broker=broker)
        try:
            return bool(client.control.ping(destination=[node], timeout=1.0))
        finally:
            client.close()

    return probe
