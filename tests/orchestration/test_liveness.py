"""Runs of a dead process are failed; every instance FloKit writes monitors its runs.

The runs here are real rows of a real SQLite instance, tagged as `flokit refresh` tags its own;
the dead process is a real one that ended. Killing a real refresh mid-run is in
tests/faults/test_refresh_kills.py.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from cli.dagster_instance import DEV_INSTANCE, prepare_instance
from orchestration.liveness import HOST_TAG, PROCESS_TAG, fail_dead_runs, process_identity, process_tags
from tests.support import ROOT


@dg.op
def noop() -> None:
    pass


@dg.job
def some_job() -> None:
    noop()


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    home = tmp_path / "dagster"
    prepare_instance(home)  # the dev dagster.yaml FloKit writes
    with dg.DagsterInstance.from_config(str(home)) as instance:
        yield instance


def ended_process_identity() -> str:
    """The identity of a real process, taken while it ran; it has ended since."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    identity = process_identity(child.pid)
    assert child.stdin is not None
    child.stdin.close()
    child.wait(timeout=30)
    assert identity is not None and process_identity(child.pid) is None
    return identity


def test_every_instance_flokit_writes_monitors_its_runs(instance: dg.DagsterInstance) -> None:
    assert instance.run_monitoring_enabled
    assert instance.run_monitoring_max_resume_run_attempts == 0  # the DefaultRunLauncher cannot resume
    assert instance.run_monitoring_start_timeout_seconds == 180
    assert instance.run_monitoring_max_runtime_seconds == 8 * 3600
    production = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())["run_monitoring"]
    assert production == yaml.safe_load(DEV_INSTANCE.read_text())["run_monitoring"]


def test_an_instance_configured_without_run_monitoring_is_named_at_each_start(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # an operator's older file
    done = prepare_instance(home)
    assert done[0] == "created" and "run monitoring is OFF in" in done[-1]
    assert (home / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"  # never rewritten


def test_the_runs_of_a_dead_process_on_this_host_are_failed_and_no_others(instance: dg.DagsterInstance) -> None:
    host = socket.gethostname()
    dead = ended_process_identity()
    mine = process_identity(os.getpid())
    assert mine is not None and "@" in mine
    identity, started = mine.rsplit(":", 1)
    reused = f"{identity}:{int(started) - 1}"  # this pid and boot, another start time

    def run(tags: dict[str, str], status: dg.DagsterRunStatus = dg.DagsterRunStatus.STARTED) -> str:
        return instance.create_run_for_job(some_job, status=status, tags=tags).run_id

    of_dead = run({HOST_TAG: host, PROCESS_TAG: dead})
    never_started = run({HOST_TAG: host, PROCESS_TAG: dead}, dg.DagsterRunStatus.NOT_STARTED)
    of_reused_pid = run({HOST_TAG: host, PROCESS_TAG: reused})  # this pid, but another process then
    of_this_process = run(process_tags())
    elsewhere = run({HOST_TAG: "another-host", PROCESS_TAG: dead})  # its pids mean nothing here
    untagged = run({})  # launched by a daemon: only `flokit up` (launched_here) looks at those
    by_hand = run({HOST_TAG: host, PROCESS_TAG: "not-a-pid"})
    finished = run({HOST_TAG: host, PROCESS_TAG: dead}, dg.DagsterRunStatus.SUCCESS)

    failed = fail_dead_runs(instance)

    assert {d.run_id for d in failed} == {of_dead, never_started, of_reused_pid}
    assert f"(pid {dead.split('@')[0]}) is gone" in next(d.reason for d in failed if d.run_id == of_dead)
    statuses = {r.run_id: r.status for r in instance.get_runs()}
    assert {k: statuses[k] for k in (of_dead, never_started, of_reused_pid)} == dict.fromkeys(
        (of_dead, never_started, of_reused_pid), dg.DagsterRunStatus.FAILURE
    )
    assert {statuses[r] for r in (of_this_process, elsewhere, untagged, by_hand)} == {dg.DagsterRunStatus.STARTED}
    assert statuses[finished] == dg.DagsterRunStatus.SUCCESS
    failure = instance.all_logs(of_dead, of_type=dg.DagsterEventType.RUN_FAILURE)
    assert "FloKit marked the run failed: the process that ran it" in (failure[0].message or "")
    assert fail_dead_runs(instance) == []  # each run once
