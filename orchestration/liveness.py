"""Runs whose process is gone are failed, so they stop holding the instance's run slots.

Dagster counts every in-progress run against `max_concurrent_runs` and the tag limits until the
run itself reports its end. A process killed with SIGKILL reports nothing: its runs stay STARTED
for ever, and four of them on the dev instance (`max_concurrent_runs: 4`) stop every other run.
Dagster's run monitoring, on in every instance FloKit writes, fails a run stuck STARTING and ends
one past `max_runtime_seconds`, but it cannot tell whether a STARTED run's process lives: the
DefaultRunLauncher does not support `check_run_worker_health` (Dagster 1.13), and a run that
`flokit refresh` executes in its own process (`execute_in_process`) has no launcher at all.

So FloKit records which process runs what, and asks whether it still lives:
- `flokit refresh` tags each of its runs with its host and process (`process_tags`);
- a run the daemon launched records its worker's pid in Dagster's "Started process for run"
  engine event; only `flokit up`, which supervises that daemon on this host, trusts that pid
  (`launched_here`).
`fail_dead_runs` fails, through `DagsterInstance.report_run_failed`, each in-progress run whose
process on this host is gone. `flokit refresh` calls it before its first run; `flokit up` when
it starts and every few seconds after (`cli.console.RunWatch`).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

HOST_TAG = "flokit/host"
CELERY_TASK_TAG = "dagster-celery/task_id"  # dagster_celery.tags.DAGSTER_CELERY_TASK_ID_TAG
PROCESS_TAG = "flokit/process"  # `pid`, or `pid@boot:start` where /proc tells a reused pid apart
# What a run in these states still holds; a run NOT_STARTED by a dead process never will start.
UNFINISHED = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
PROC = Path("/proc")


@dataclass(frozen=True)
class DeadRun:
    run_id: str
    job_name: str
    pid: int
    reason: str


def process_identity(pid: int) -> str | None:
    """Who `pid` is on this host: the pid, plus the boot and its start time where /proc tells
    them (a pid is reused; a (boot, start time) pair is not). None when no such process runs."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # it exists, under another user
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        boot = (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return str(pid)  # no /proc (macOS): the pid alone
    # pid (comm) state ...: comm may hold spaces and parentheses, so split after its last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        return None  # a zombie has ended; only its exit status is left
    return f"{pid}@{boot}:{fields[19]}"  # field 22 of stat, the start time in clock ticks


def process_tags() -> dict[str, str]:
    """The tags of a run this process executes itself, so another process can tell it died."""
    identity = process_identity(os.getpid())
    assert identity is not None, "this process runs"
    return {HOST_TAG: socket.gethostname(), PROCESS_TAG: identity}


def _tagged_pid(identity: str) -> int | None:
    head = identity.split("@", 1)[0]
    return int(head) if head.isdigit() and int(head) > 0 else None  # a tag written by hand is ignored


def _tagged_gone(identity: str) -> bool:
    pid = _tagged_pid(identity)
    if pid is None:
        return False
    now = process_identity(pid)
    return now is None or ("@" in identity and "@" in now and now != identity)


def _worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The run worker's pid as the code server recorded it when it started the run."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        event = entry.dagster_event
        data = event.engine_event_data if event is not None else None
        pid = data.metadata.get("pid") if data is not None else None
        if pid is not None and str(pid.value).isdigit() and int(str(pid.value)) > 0:
            return int(str(pid.value))
    return None


def dead_runs(instance: dg.DagsterInstance, *, launched_here: bool = False) -> list[DeadRun]:
    """The unfinished runs whose process on this host is gone: those tagged by a FloKit process
    on this host, and with `launched_here` also those whose recorded worker pid is not running."""
    host = socket.gethostname()
    found = []
    for run in instance.get_runs(dg.RunsFilter(statuses=UNFINISHED)):
        identity = run.tags.get(PROCESS_TAG)
        if identity is not None:
            pid = _tagged_pid(identity)
            if run.tags.get(HOST_TAG) == host and pid is not None and _tagged_gone(identity):
                found.append(DeadRun(run.run_id, run.job_name, pid, f"the process that ran it (pid {pid}) is gone"))
            continue
        # A run on a Celery worker ran on another host: its pid means nothing here, and the
        # launcher's health check watches it (orchestration/launcher.py).
        if launched_here and run.status == dg.DagsterRunStatus.STARTED and CELERY_TASK_TAG not in run.tags:
            worker = _worker_pid(instance, run.run_id)
            if worker is not None and process_identity(worker) is None:
                found.append(DeadRun(run.run_id, run.job_name, worker, f"its run worker (pid {worker}) is gone"))
    return found


def fail_dead_runs(instance: dg.DagsterInstance, *, launched_here: bool = False) -> list[DeadRun]:
    """Fail every run of `dead_runs`; returns them. A run that ended meanwhile is left alone."""
    failed = []
    for dead in dead_runs(instance, launched_here=launched_here):
        run = instance.get_run_by_id(dead.run_id)
        if run is None or run.status not in UNFINISHED:
            continue
        instance.report_run_failed(run, f"FloKit marked the run failed: {dead.reason} (killed?)")
        failed.append(dead)
    return failed
