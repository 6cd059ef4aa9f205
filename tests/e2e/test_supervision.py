"""`flokit up` supervises its children: a killed Dagster daemon or webserver comes back while the
API answers, a crash loop stops everything with the reason, a damaged instance is refused with
the repair, which works."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import requests

from cli.dagster_instance import head_revision
from cli.supervisor import RestartPolicy, Supervisor
from cli.up import children
from tests.support import ROOT, bearer, free_port, http_ok, wait_for
from tests.support.up import Up, alembic_rows, dagster_ready, flokit_up, run_flokit
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.settings import Settings

pytestmark = pytest.mark.e2e

# The older revision a racing process stamps when it finds tables but no alembic_version row
# (Dagster's LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION, written out: FloKit imports nothing
# from `dagster._core`).
OLDER = "5771160a95ad"


@contextmanager
def polling_healthz(api: str) -> Iterator[list[int | str]]:
    """GET /healthz ten times a second from a thread; yields every answer (status or error name)."""
    answers: list[int | str] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                answers.append(requests.get(f"{api}/healthz", timeout=2).status_code)
            except requests.RequestException as exc:
                answers.append(type(exc).__name__)
            time.sleep(0.1)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        done.set()
        thread.join(timeout=10)


def kill_and_wait_for_restart(up: Up, name: str) -> int:
    """kill -9 the child `name`; returns the new child's pid once the log says it restarted."""
    victim = up.child(name)
    assert victim is not None, f"no {name} among flokit up's children"
    victim.send_signal(signal.SIGKILL)
    up.wait_for_log(f"{name} (pid {victim.pid}) died: killed by SIGKILL (signal 9); restarting in 1 s", 30)
    up.wait_for_log(f"{name} restarted (pid ", 30)
    [new_pid] = [int(p) for p in re.findall(rf"{name} restarted \(pid (\d+)\)", up.output())][-1:]
    replacement = up.child(name)
    assert replacement is not None and replacement.pid == new_pid != victim.pid
    return new_pid


def test_a_killed_daemon_or_webserver_is_restarted_while_the_api_answers(up_data_dir: Path) -> None:
    with flokit_up(up_data_dir) as up:
        wait_for(lambda: requests.get(f"{up.api}/healthz", timeout=2).status_code == 200, 180, "API", up.process)
        up.wait_for_log("code location flokit loaded", 300)
        up.remember_descendants()
        with polling_healthz(up.api) as answers:
            killed_at = time.monotonic()
            kill_and_wait_for_restart(up, "dagster-daemon")
            kill_and_wait_for_restart(up, "dagster-webserver")
            # The new webserver loads the location again and the new daemon heartbeats.
            wait_for(lambda: dagster_ready(up.ui), 300, "Dagster ready again", up.process)
            ready_again_s = time.monotonic() - killed_at
            up.remember_descendants()
        assert len(answers) > 20 and set(answers) == {200}, answers
        print(f"\ndaemon and webserver killed and back in {ready_again_s:.1f} s; /healthz {len(answers)} x 200")
        status = up.stop()
    output = up.output()
    assert status == 0, output[-3000:]
    assert "crash loop" not in output and "stopped." in output
    assert not up.left_behind()


def test_a_child_that_keeps_dying_stops_everything_with_the_reason(up_data_dir: Path) -> None:
    """Something kills the daemon as soon as it starts (as an OOM killer would): after the fifth
    death within ten minutes `flokit up` stops the API too and exits 1 saying why."""
    with flokit_up(up_data_dir) as up:
        wait_for(lambda: requests.get(f"{up.api}/healthz", timeout=2).status_code == 200, 180, "API", up.process)
        killed: list[int] = []
        first_kill = 0.0
        deadline = time.monotonic() + 180
        while up.process.poll() is None and time.monotonic() < deadline:
            up.remember_descendants()
            daemon = up.child("dagster-daemon")
            if daemon is not None and daemon.pid not in killed:
                daemon.send_signal(signal.SIGKILL)
                killed.append(daemon.pid)
                first_kill = first_kill or time.monotonic()
            time.sleep(0.1)
        status = up.process.wait(timeout=90)
        stopped_after_s = time.monotonic() - first_kill
        print(f"\ncrash loop: {len(killed)} kills, everything stopped {stopped_after_s:.1f} s after the first")
    output = up.output()
    assert status == 1, output[-3000:]
    assert len(killed) == 5
    reason = "dagster-daemon died 5 times within 600 s (last: killed by SIGKILL (signal 9)); a crash loop"
    assert f"flokit up: {reason}" in output and f"stopped: {reason}" in output
    assert output.count("dagster-daemon restarted") == 4
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{up.api}/healthz", timeout=2)
    assert not up.left_behind()


def test_a_damaged_instance_is_refused_naming_the_cause_and_the_repair_makes_it_start(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    home = data_dir / "dagster"
    # What the first-start race left behind: an instance whose run storage holds two revisions.
    home.mkdir(parents=True)
    shutil.copyfile(ROOT / "orchestration" / "instance" / "dagster.dev.yaml", home / "dagster.yaml")
    from dagster import DagsterInstance

    DagsterInstance.from_config(str(home)).dispose()
    with sqlite3.connect(home / "history" / "runs.db") as con:
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (OLDER,))
    con.close()

    with flokit_up(data_dir) as up:
        status = up.process.wait(timeout=120)
    refused = up.output()
    assert status == 1, refused[-3000:]
    head = head_revision()
    assert f"history/runs.db has 2 rows {sorted([head, OLDER])}" in refused
    assert "Repair it with `flokit dagster repair`" in refused
    assert "API (v1" not in refused  # nothing was started on the damaged instance

    check = run_flokit(data_dir, "dagster", "check")
    assert check.returncode == 1 and "history/runs.db has 2 rows" in check.stdout

    repaired = run_flokit(data_dir, "dagster", "repair")
    assert repaired.returncode == 0, repaired.stderr
    assert f"history/runs.db: alembic_version held {', '.join(sorted([head, OLDER]))}; kept {head}" in repaired.stdout
    assert {rows == [head] for rows in alembic_rows(home).values()} == {True}

    with flokit_up(data_dir, log_name="up-after-repair.log") as up:
        up.wait_for_log("code location flokit loaded", 300)
        assert requests.get(f"{up.api}/healthz", timeout=5).status_code == 200
        busy = run_flokit(data_dir, "dagster", "repair")
        assert busy.returncode == 1 and f"in use by flokit process {up.process.pid}" in busy.stderr
        assert up.stop() == 0


@pytest.fixture
def sqlite_settings(tmp_path: Path) -> Settings:
    """One backend: the held write lock is SQLite's (a request waits on it inside a worker)."""
    data = tmp_path / "data"
    data.mkdir()
    settings = replace(Settings(data_dir=data, database_url=f"sqlite:///{data / 'flokit.db'}"), api_port=free_port())
    migrate.upgrade(Database(settings.database_url))
    return settings


def test_a_killed_gunicorn_master_is_restarted_at_once_with_its_orphaned_workers_killed(
    sqlite_settings: Settings, capfd: pytest.CaptureFixture[str]
) -> None:
    """kill -9 of the master while a worker serves a request: the orphaned workers kept the
    listening socket until that request ended (up to the 15 s graceful timeout), and the API
    stayed down that long. Killed with the master's group, the restart binds on its first try."""
    settings = sqlite_settings
    with Database(settings.database_url).write() as conn:
        key = bootstrap(conn, name="Acme")["api_key_read_write"]
    api = children(settings, 2)[0]  # gunicorn exactly as `flokit up` starts it
    supervisor = Supervisor([api], {**os.environ, **settings.child_env()}, ROOT, RestartPolicy(), grace_s=20)
    base = f"http://127.0.0.1:{settings.api_port}"
    supervisor.start_all()
    lock = sqlite3.connect(settings.database_url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
    try:
        wait_for(lambda: (supervisor.tick(time.monotonic()), http_ok(f"{base}/healthz")())[1], 60, "gunicorn")
        master = api.process
        assert master is not None
        lock.execute("BEGIN IMMEDIATE")  # a write request now waits in its worker (busy timeout 10 s)
        event = {"event": "purchase", "user_id": "u-1", "timestamp": "2026-11-20T18:04:05Z"}

        def send() -> None:
            with contextlib.suppress(requests.RequestException):  # its worker is killed mid-request
                requests.post(f"{base}/v1/events", json=event, headers=bearer(key), timeout=30)

        sent = threading.Thread(target=send, daemon=True)
        sent.start()
        time.sleep(1.0)  # the request reached a worker and waits for the lock
        master.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()

        def restarted() -> bool:
            supervisor.tick(time.monotonic())
            return api.process is not None and api.process.pid != master.pid

        wait_for(restarted, 30, "the API's restart after its master was killed")
        restarted_after_s = time.monotonic() - killed_at
        lock.execute("ROLLBACK")  # the new master's app may open the database
        wait_for(lambda: (supervisor.tick(time.monotonic()), http_ok(f"{base}/healthz")())[1], 60, "the new API")
    finally:
        lock.close()
        supervisor.stop_all()
    log = (settings.paths.logs / "api.log").read_text()
    print(f"\n[fault] gunicorn master killed with a request in flight: restarted after {restarted_after_s:.1f} s")
    err = capfd.readouterr().err
    assert "api (pid" in err and "died: killed by SIGKILL (signal 9); restarting in 1 s" in err
    assert err.count("api restarted (pid") == 1
    assert log.count("Listening at:") == 2 and "Connection in use" not in log  # bound on the first try
    assert restarted_after_s < 5  # not held by the orphaned worker until its request ended (10 s)
