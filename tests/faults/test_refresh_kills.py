"""`flokit refresh` killed with SIGKILL mid-run, as an operator's Ctrl-\\ or an OOM killer does.

A refresh executes its Dagster runs in its own process, so nothing else reports their end: they
stayed STARTED for ever, holding the dev instance's two run slots, and the integration sync they
ran stayed `running`. Each test kills real `flokit refresh` processes while a sync waits on a
fake Adjust held open on 127.0.0.1, on a real Dagster instance in the test's data directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from tests.providers.adjust_fake import TOKEN, AdjustFake, running
from tests.support import BIN, ROOT, http_ok, wait_for
from tests.support.cli import Ran, flokit_in_process
from tests.support.databases import fresh_database_url
from tests.support.up import flokit_up
from tests.support.webhook_receiver import running_receiver
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.integrations import repository as repo
from warehouse.settings import Settings, instance_key_for
from warehouse.webhooks import endpoints
from warehouse.webhooks.outbox import emit_event

pytestmark = [pytest.mark.fault, pytest.mark.e2e]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """One backend: what the kill leaves behind is in the Dagster instance (SQLite here either way)."""
    yield from fresh_database_url(request, "sqlite", tmp_path)


@dataclass
class HeldAdjust(AdjustFake):
    """Adjust that holds every request until `release` is set: a sync waits in it, mid-run."""

    arrived: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.arrived.set()
        self.release.wait(timeout=120)
        return super().__call__(environ, start_response)


@pytest.fixture
def adjust() -> Iterator[HeldAdjust]:
    fake = HeldAdjust(campaigns=1, creatives=1, countries=1)
    with running(fake):
        try:
            yield fake
        finally:
            fake.release.set()


def flokit_env(settings: Settings) -> dict[str, str]:
    env = {**os.environ, **settings.child_env()}
    env.pop("FLOKIT_SECRET_KEY", None)  # the instance key `flokit db upgrade` keeps in the data directory
    return env


def flokit(settings: Settings, *args: str) -> Ran:
    """A command run in-process (`tests.support.cli`); the refreshes killed are real processes."""
    return flokit_in_process(flokit_env(settings), *args)


def queue_adjust_sync(settings: Settings, db: Database, workspace: dict, fake: AdjustFake, tmp_path: Path) -> str:
    """Connect an Adjust integration on `fake` with the CLI and queue a manual sync; its id."""
    config = tmp_path / "adjust.json"
    config.write_text(json.dumps({"api_token": TOKEN, "base_url": fake.url, "lookback_days": 1}))
    done = flokit(
        settings, "admin", "integrations", "connect", "--workspace", workspace["workspace_id"],
        "--type", "attribution_provider_a", "--config", str(config), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with db.write() as conn:
        sync, _ = repo.request_sync_for_operator(conn, integration_id=json.loads(done.stdout)["integration_id"])
    return sync.id


def kill_refresh_mid_sync(settings: Settings, fake: HeldAdjust) -> None:
    """Start `flokit refresh`, SIGKILL it once its sync is waiting on `fake`."""
    fake.arrived.clear()
    refresh = subprocess.Popen(
        [str(BIN / "flokit"), "refresh"],
        cwd=ROOT,
        env=flokit_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(fake.arrived.is_set, 120, "the refresh's sync to call Adjust", refresh)
    finally:
        refresh.send_signal(signal.SIGKILL)
        assert refresh.wait(timeout=30) == -signal.SIGKILL


def refresh_runs(settings: Settings) -> list[dg.DagsterRun]:
    with dg.DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        return list(instance.get_runs(dg.RunsFilter(tags={"flokit/refresh": "true"})))


def test_a_sync_killed_with_its_refresh_is_failed_and_the_next_refresh_runs_it_again(
    settings: Settings, db: Database, workspace: dict, adjust: HeldAdjust, tmp_path: Path
) -> None:
    assert flokit(settings, "db", "upgrade").returncode == 0
    sync_id = queue_adjust_sync(settings, db, workspace, adjust, tmp_path)
    kill_refresh_mid_sync(settings, adjust)
    with db.read() as conn:
        killed = repo.get_sync(conn, sync_id=sync_id)
        assert killed.status == "running"
        assert repo.get_integration_for_operator(conn, integration_id=killed.integration_id).status == "syncing"

    adjust.release.set()  # Adjust answers from now on
    again = flokit(settings, "refresh", "--json")
    with db.read() as conn:
        ended = repo.get_sync(conn, sync_id=sync_id)
        history = repo.sync_history(conn, integration_id=killed.integration_id)
        integration = repo.get_integration_for_operator(conn, integration_id=killed.integration_id)
    print(f"\n[fault] refresh killed mid-sync; the next refresh said:\n{again.stderr[-1500:]}")
    assert ended.status == "failed" and ended.error_code is None
    assert f"its run {killed.run_id} ended (FAILURE)" in (ended.error_message or "")
    assert [(s.trigger, s.status) for s in history] == [("manual", "succeeded"), ("manual", "failed")]
    assert integration.status == "connected" and integration.last_synced_at is not None
    assert f"sync {sync_id} marked failed" in again.stderr and f"queued again as {history[0].id}" in again.stderr
    assert again.returncode == 0, again.stderr
    dead = {r.run_id: r.status for r in refresh_runs(settings)}[killed.run_id or ""]
    assert dead == dg.DagsterRunStatus.FAILURE


def test_runs_of_two_killed_refreshes_are_failed_and_webhooks_are_delivered(
    settings: Settings, db: Database, workspace: dict, adjust: HeldAdjust, tmp_path: Path
) -> None:
    """Two refreshes killed mid-sync held both of the dev instance's run slots: the daemon queued
    every later run behind them (0 of 20 webhooks in 90 s). `flokit up` fails them at start."""
    assert flokit(settings, "db", "upgrade").returncode == 0
    with db.write() as conn:
        other = bootstrap(conn, name="Second workspace")  # one Adjust integration per workspace
    for n, ws in enumerate((workspace, other)):
        (tmp_path / str(n)).mkdir()
        queue_adjust_sync(settings, db, ws, adjust, tmp_path / str(n))
    kill_refresh_mid_sync(settings, adjust)
    kill_refresh_mid_sync(settings, adjust)
    adjust.release.set()

    with running_receiver() as receiver:
        with db.write() as conn:
            endpoints.create_endpoint(
                conn, workspace_id=workspace["workspace_id"], url=receiver.url + "/after-kills",
                events=["action.created"], allow_private=True,
                instance_key=instance_key_for({}, settings.data_dir),  # the key `flokit db upgrade` made
            )  # fmt: skip
            emit_event(conn, workspace_id=workspace["workspace_id"], event_type="action.created", data={"n": 1})
        env = {
            "FLOKIT_DATABASE_URL": settings.database_url,
            "FLOKIT_WEBHOOKS_ALLOW_PRIVATE": "1",
            "FLOKIT_SENSOR_INTERVAL_S": "1",
        }
        with flokit_up(settings.data_dir, env=env) as up:
            wait_for(http_ok(f"{up.api}/healthz"), 180, "API", up.process)
            wait_for(lambda: len(receiver.at("/after-kills")) >= 1, 120, "the webhook after two killed refreshes")
            assert up.stop(signal.SIGINT) == 0
        output = up.output()
    runs = refresh_runs(settings)
    print(f"\n[fault] two refreshes killed; flokit up said:\n{output[-2000:]}")
    assert len(runs) == 2 and {r.status for r in runs} == {dg.DagsterRunStatus.FAILURE}
    assert "marked failed: the process that ran it (pid" in output
