"""What `flokit up` prints per Dagster run (read from a real instance), where the children's
output goes (log files, and the console too with --verbose), and the log files' rotation."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import dagster as dg
import pytest

from cli.console import LogRotation, RunView, RunWatch, first_line, run_line, warnings_to
from cli.dagster_instance import prepare_instance
from cli.supervisor import Child, RestartPolicy, Supervisor
from orchestration.liveness import HOST_TAG, PROCESS_TAG, process_tags
from tests.support import ROOT

UI = "http://127.0.0.1:3000"


def test_run_lines_say_what_ran_how_long_and_where_to_look() -> None:
    started = RunView("0123456789abcdef", "STARTED", "canonical_events_job", "2026-01-01..2026-01-31", "a_sensor", None)
    assert run_line(started) == "run 01234567 started: canonical_events_job [2026-01-01..2026-01-31] (by a_sensor)"
    done = RunView("0123456789abcdef", "SUCCESS", "refresh_reports", None, None, 12.34)
    assert (
        run_line(done, ["payback", "ltv"])
        == "run 01234567 succeeded in 12.3 s: refresh_reports; materialized ltv, payback"
    )
    failed = RunView("0123456789abcdef", "FAILURE", "job", "2026-01-02", None, 1.0)
    assert run_line(failed, [], "step x failed: ValueError: boom", "details: here") == (
        "run 01234567 FAILED in 1.0 s: job [2026-01-02]: step x failed: ValueError: boom; details: here"
    )
    assert run_line(RunView("r", "QUEUED", "job", None, None, None)) is None
    assert first_line("\n  first\nsecond") == "first" and len(first_line("x" * 1000)) == 300


@dg.asset
def good_asset() -> int:
    return 1


@dg.asset
def bad_asset() -> int:
    raise ValueError("the input file is missing")


def test_the_watch_reports_each_finished_run_once_with_its_assets_and_a_failure_with_its_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "dagster"
    prepare_instance(home)
    watch = RunWatch(home, UI, tmp_path / "logs" / "dagster-daemon.log", poll_s=0, sensors_every_s=3600)
    job = dg.Definitions(assets=[good_asset, bad_asset]).resolve_implicit_global_asset_job_def()
    quiet = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            ok = job.execute_in_process(instance=instance, asset_selection=[good_asset.key], run_config=quiet)
            bad = job.execute_in_process(
                instance=instance, asset_selection=[bad_asset.key], run_config=quiet, raise_on_error=False
            )
        capsys.readouterr()
        watch(1.0)
        lines = capsys.readouterr().err.splitlines()
        watch(2.0)  # nothing new: nothing printed again
        assert capsys.readouterr().err == ""
    finally:
        watch.close()
    assert len(lines) == 2, lines
    assert f"flokit up: run {ok.run_id[:8]} succeeded in " in lines[0]
    assert lines[0].endswith(": good_asset; materialized good_asset")
    assert f"run {bad.run_id[:8]} FAILED in " in lines[1]
    assert "bad_asset: step bad_asset failed: ValueError: the input file is missing" in lines[1]
    assert f"details: {UI}/runs/{bad.run_id} and {tmp_path / 'logs' / 'dagster-daemon.log'}" in lines[1]


def test_a_run_of_a_dead_process_is_failed_once_and_a_live_ones_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`flokit up` frees the slot a killed `flokit refresh` held (the whole kill: tests/faults)."""
    home = tmp_path / "dagster"
    prepare_instance(home)
    watch = RunWatch(home, UI, tmp_path / "daemon.log", poll_s=0, sensors_every_s=0)
    job = dg.Definitions(assets=[good_asset]).resolve_implicit_global_asset_job_def()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    started = dg.DagsterRunStatus.STARTED
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            dead = instance.create_run_for_job(
                job, status=started, tags={HOST_TAG: process_tags()[HOST_TAG], PROCESS_TAG: gone.stdout.strip()}
            )
            alive = instance.create_run_for_job(job, status=started, tags=process_tags())
            capsys.readouterr()
            watch(1.0)
            first = capsys.readouterr().err
            watch(2.0)
            second = capsys.readouterr().err
            statuses = {r.run_id: r.status for r in instance.get_runs()}
    finally:
        watch.close()
    assert statuses == {dead.run_id: dg.DagsterRunStatus.FAILURE, alive.run_id: started}
    assert f"run {dead.run_id[:8]} (__ASSET_JOB) marked failed: the process that ran it (pid " in first
    assert "its run slot is free again" in first
    assert "marked failed" not in second


def test_an_unreadable_instance_is_said_once_and_is_no_reason_to_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dagster.yaml").write_text("run_storage: {module: no.such.module, class: Nope}\n")
    watch = RunWatch(tmp_path, UI, tmp_path / "daemon.log", poll_s=0)
    assert watch(1.0) is None and watch(2.0) is None
    err = capsys.readouterr().err
    assert err.count("cannot read the Dagster instance for now") == 1


def emitter(text: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        f"import sys, time; print({text!r}); print('to stderr', file=sys.stderr); time.sleep(30)",
    ]


def wait_for_text(path: Path, text: str) -> None:
    for _ in range(200):
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path}")


@pytest.mark.parametrize("echo", [False, True])
def test_a_child_with_a_log_file_writes_there_and_to_the_console_only_when_echoed(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], echo: bool
) -> None:
    log = tmp_path / "logs" / "talker.log"
    talker = Child("talker", emitter("DEBUG - step event"), log)
    supervisor = Supervisor([talker], dict(os.environ), ROOT, RestartPolicy(), grace_s=5, echo=echo)
    supervisor.start_all()
    try:
        wait_for_text(log, "to stderr")
    finally:
        supervisor.stop_all()
    assert "DEBUG - step event" in log.read_text() and "to stderr" in log.read_text()
    assert (log.stat().st_mode & 0o777, log.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    console = capfd.readouterr()
    assert ("DEBUG - step event" in console.out) is echo and ("to stderr" in console.out) is echo


def test_warnings_go_to_their_log_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = warnings.showwarning
    try:
        warnings_to(tmp_path / "logs" / "flokit-up.log")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("a beta parameter", FutureWarning, stacklevel=1)
    finally:
        warnings.showwarning = saved
    assert "FutureWarning: a beta parameter" in (tmp_path / "logs" / "flokit-up.log").read_text()
    assert "Warning" not in capsys.readouterr().err


def test_a_log_file_past_its_size_is_kept_once_and_emptied_in_place(tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    log.write_text("x" * 200)
    rotation = LogRotation([log, tmp_path / "missing.log"], max_bytes=100, every_s=60)
    rotation(0.0)
    assert log.read_text() == "" and (tmp_path / "daemon.log.1").read_text() == "x" * 200
    log.write_text("y" * 200)
    rotation(30.0)  # checked once a minute
    assert log.read_text() == "y" * 200


class Value:
    def __init__(self, value: str) -> None:
        self.value = value


class FakeTicks:
    """The two instance methods `RunWatch.sensors` reads, answering from a dict of last ticks."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[str, str | None]] = {}

    def all_instigator_state(self) -> list[object]:
        kinds = {"canonical_events_sensor": "SENSOR", "six_hourly": "SCHEDULE"}
        return [
            type(
                "State",
                (),
                {
                    "instigator_type": Value(kind),
                    "instigator_name": name,
                    "instigator_origin_id": name,
                    "selector_id": name,
                },
            )()
            for name, kind in kinds.items()
        ]

    def get_ticks(self, origin_id: str, _selector_id: str, limit: int) -> list[object]:
        if origin_id not in self.last:
            return []
        status, message = self.last[origin_id]
        error = type("Error", (), {"message": message})() if message else None
        return [type("Tick", (), {"status": Value(status), "error": error, "timestamp": 1.0})()][:limit]


def test_a_sensor_is_reported_when_it_starts_failing_and_when_it_recovers(tmp_path: Path) -> None:
    watch = RunWatch(tmp_path, UI, tmp_path / "daemon.log")
    fake = FakeTicks()
    watch.instance = fake  # type: ignore[assignment]
    assert watch.sensors() == []
    fake.last = {
        "canonical_events_sensor": ("FAILURE", "OperationalError: database is locked\nTraceback"),
        "six_hourly": ("FAILURE", "not a sensor"),
    }
    assert watch.sensors() == [
        f"sensor canonical_events_sensor failed: OperationalError: database is locked; details: {UI}/automation"
    ]
    assert watch.sensors() == []  # still failing: said once
    fake.last["canonical_events_sensor"] = ("SKIPPED", None)
    assert watch.sensors() == ["sensor canonical_events_sensor works again"]
    assert watch.sensors() == []
