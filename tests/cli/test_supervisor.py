"""Supervision decisions (backoff, crash-loop window), the code-location answer, and the
supervisor on real short-lived processes."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from cli.location import location_state
from cli.supervisor import Child, RestartPolicy, Restarts, Supervisor, describe_exit
from tests.support import ROOT

POLICY = RestartPolicy(first_delay_s=1, max_delay_s=30, healthy_after_s=60, max_deaths=5, window_s=600)


def test_restart_delays_double_from_one_second_up_to_thirty() -> None:
    restarts = Restarts(RestartPolicy(max_deaths=100, window_s=600))
    delays = [restarts.after_death(died_at=i * 1.0, up_for_s=1.0) for i in range(8)]
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]


def test_a_child_that_stayed_up_a_minute_restarts_after_one_second_again() -> None:
    restarts = Restarts(RestartPolicy(max_deaths=100))
    assert [restarts.after_death(t, up_for_s=2) for t in (0, 10, 20)] == [1, 2, 4]
    assert restarts.after_death(100, up_for_s=60) == 1
    assert restarts.after_death(110, up_for_s=5) == 2


def test_the_fifth_death_within_ten_minutes_is_a_crash_loop() -> None:
    restarts = Restarts(POLICY)
    assert all(restarts.after_death(t, up_for_s=90) is not None for t in (0, 100, 200, 300))
    assert restarts.after_death(400, up_for_s=90) is None


def test_deaths_older_than_the_window_are_forgotten() -> None:
    restarts = Restarts(POLICY)
    for t in (0, 150, 300, 450):
        assert restarts.after_death(t, up_for_s=150) == 1
    assert restarts.after_death(601, up_for_s=150) == 1  # the death at 0 left the window
    assert len(restarts.deaths) == 4


def test_exit_statuses_read_as_an_operator_needs_them() -> None:
    assert describe_exit(1) == "exit status 1"
    assert describe_exit(-9) == "killed by SIGKILL (signal 9)"
    assert describe_exit(-15) == "killed by SIGTERM (signal 15)"


def entry(status: str, result: dict[str, str] | None) -> dict[str, object]:
    return {
        "data": {
            "workspaceOrError": {
                "__typename": "Workspace",
                "locationEntries": [{"name": "flokit", "loadStatus": status, "locationOrLoadError": result}],
            }
        }
    }


def test_the_location_answer_loading_loaded_or_failed() -> None:
    assert location_state(entry("LOADING", None), "flokit").loaded is False
    assert location_state(entry("LOADED", {"__typename": "RepositoryLocation"}), "flokit").error is None
    error = {"__typename": "PythonError", "message": "Error loading\n", "causes": [{"message": "ImportError: boom\n"}]}
    failed = location_state(entry("LOADED", error), "flokit")
    assert failed.loaded and failed.error == "Error loading\n  caused by: ImportError: boom"
    assert location_state(entry("LOADED", {"__typename": "RepositoryLocation"}), "other").loaded is False
    assert location_state({"data": {"workspaceOrError": {"__typename": "Workspace"}}}, "flokit").loaded is False


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_dying_child_is_restarted_with_its_log_lines_then_a_crash_loop_stops_it(
    capfd: pytest.CaptureFixture[str],
) -> None:
    policy = RestartPolicy(first_delay_s=0.05, max_delay_s=0.2, healthy_after_s=60, max_deaths=4, window_s=60)
    steady = Child("steady", python("import time; time.sleep(60)"))
    crashing = Child("crashing", python("raise SystemExit(3)"))
    supervisor = Supervisor([steady, crashing], dict(os.environ), ROOT, policy, grace_s=5)
    supervisor.start_all()
    steady_pid = steady.process.pid if steady.process else None
    try:
        reason = supervisor.run(lambda: False, tick_s=0.02)
    finally:
        supervisor.stop_all()
    assert reason == "crashing died 4 times within 60 s (last: exit status 3); a crash loop, stopping everything"
    log = capfd.readouterr().err
    assert log.count("crashing (pid") == 3 and "died: exit status 3; restarting in 0 s (death 1 of 4" in log
    assert log.count("crashing restarted (pid") == 3
    assert "steady" not in log  # the healthy child ran on untouched, and was stopped at the end
    assert steady.process is not None and steady.process.pid == steady_pid and steady.process.returncode == -15


def test_what_a_dead_child_started_is_stopped_before_it_starts_again(tmp_path: Path) -> None:
    """A dead gunicorn master's workers, a dead daemon's code server: its process group gets
    SIGTERM, so nothing of the old child runs beside the new one."""
    pids = tmp_path / "pids"
    # Each start notes whether the grandchild of the previous start still runs, then leaves one.
    leaves_a_grandchild = f"""
import pathlib, subprocess, sys, time
pids = pathlib.Path({str(pids)!r})
previous = pids.read_text().split()[-1] if pids.exists() else None
def running(pid):
    try:
        return pathlib.Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with pids.open("a") as out:
    out.write(f"{{'previous-running' if previous and running(previous) else 'clean'}} {{p.pid}}\\n")
time.sleep(0.3)
raise SystemExit(1)
"""
    policy = RestartPolicy(first_delay_s=0.05, max_delay_s=0.05, max_deaths=3, window_s=60)
    child = Child("parent", python(leaves_a_grandchild))
    supervisor = Supervisor([child], dict(os.environ), ROOT, policy, grace_s=10)
    started = time.monotonic()
    supervisor.start_all()
    try:
        assert supervisor.run(lambda: False, tick_s=0.02) is not None
    finally:
        supervisor.stop_all()
    assert time.monotonic() - started < 8  # SIGTERM did it, not SIGKILL after the 10 s grace period
    starts = [line.split() for line in pids.read_text().splitlines()]
    assert [state for state, _pid in starts] == ["clean", "clean", "clean"]
    grandchildren = [int(pid) for _state, pid in starts]
    for pid in grandchildren:  # gone, or a zombie that PID 1 has not reaped yet
        with contextlib.suppress(psutil.NoSuchProcess):
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_stop_all_ends_a_child_that_ignores_sigterm_after_the_grace_period() -> None:
    stubborn = Child(
        "stubborn",
        python("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"),
    )
    supervisor = Supervisor([stubborn], dict(os.environ), ROOT, POLICY, grace_s=1)
    supervisor.start_all()
    time.sleep(1.0)  # let it install its handler
    started = time.monotonic()
    supervisor.stop_all()
    assert time.monotonic() - started < 5
    assert stubborn.process is not None and stubborn.process.returncode == -signal.SIGKILL
