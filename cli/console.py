"""What `flokit up` shows on its console, and where the rest goes.

The children (gunicorn, the Dagster webserver and daemon, and what they start: code servers,
run workers) write their full logs to one file each under `<data_dir>/logs/` (`DataPaths.logs`),
never to the console: Dagster logs every step event at DEBUG and its BetaWarnings at each
definitions load, about a thousand lines before the first reports. The console keeps the
banner, the addresses and one line per meaningful event, which `RunWatch` reads from the Dagster
instance itself (run storage and sensor ticks) rather than from the children's output, whose
format is Dagster's to change: a run started, a run finished with its assets and duration, a
failed run with its error and where to look, a sensor that starts failing or recovers, and runs
stuck in the queue. It also fails the runs whose process on this host is gone (a `flokit refresh`
or a run worker killed with SIGKILL), which would otherwise hold their run slots for good
(`orchestration.liveness`): at start, and every `sensors_every_s` after.

`flokit up --verbose` also copies every child's output to the console, as before.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from cli.supervisor import log, open_log

if TYPE_CHECKING:
    import dagster as dg

# A log file is copied to `<name>.1` and emptied when it grows past this (checked once a minute):
# the daemon alone writes several megabytes a day. One old file is kept.
MAX_LOG_BYTES = 50 * 1024 * 1024
# Dagster's run tags: what requested a run, and the partitions it covers.
SENSOR_TAG = "dagster/sensor_name"
SCHEDULE_TAG = "dagster/schedule_name"
BACKFILL_TAG = "dagster/backfill"
PARTITION_TAG = "dagster/partition"
# The first line of an error, cut here: the full traceback is in the UI and the log file.
ERROR_CHARS = 300
# Runs waiting in the queue longer than this are worth a line: every slot is held (by runs of a
# dead process on another host, or a long backlog), and the operator may have to end one.
STUCK_AFTER = dt.timedelta(minutes=5)


def warnings_to(path: Path) -> None:
    """Python warnings of this process (Dagster's BetaWarnings when it loads the definitions)
    appended to `path` instead of stderr."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        fd = open_log(path)
        with os.fdopen(fd, "a") as out:
            out.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = show


class LogRotation:
    """A supervisor check: a log file past `max_bytes` is copied to `<name>.1` and emptied in place.

    In place, because the children keep their descriptor open: they write with O_APPEND, so after
    the truncation they go on at the new end of the same file. Lines written between the copy and
    the truncation are lost; a copy takes a fraction of a second once per 50 MB.
    """

    def __init__(self, paths: list[Path], max_bytes: int = MAX_LOG_BYTES, every_s: float = 60.0) -> None:
        self.paths = paths
        self.max_bytes = max_bytes
        self.every_s = every_s
        self.next_check = 0.0

    def __call__(self, now: float) -> None:
        if now < self.next_check:
            return
        self.next_check = now + self.every_s
        for path in self.paths:
            try:
                if path.stat().st_size <= self.max_bytes:
                    continue
                shutil.copyfile(path, path.with_name(path.name + ".1"))
                os.truncate(path, 0)
            except OSError:
                continue  # not there yet, or the disk is full: the next check tries again


@dataclass(frozen=True)
class RunView:
    """What the console says about one Dagster run."""

    run_id: str
    status: str  # DagsterRunStatus's value: QUEUED, STARTING, STARTED, SUCCESS, FAILURE, CANCELED, ...
    what: str  # its assets, or its job's name
    partitions: str | None
    requested_by: str | None
    duration_s: float | None

    @property
    def short_id(self) -> str:
        return self.run_id[:8]


FINISHED = {"SUCCESS": "succeeded", "FAILURE": "FAILED", "CANCELED": "canceled"}


def run_line(
    run: RunView, materialized: list[str] | None = None, error: str | None = None, where: str | None = None
) -> str | None:
    """The console line for a run in its current state; None for a state not worth a line."""
    target = run.what + (f" [{run.partitions}]" if run.partitions else "")
    if run.status == "STARTED":
        by = f" (by {run.requested_by})" if run.requested_by else ""
        return f"run {run.short_id} started: {target}{by}"
    if run.status not in FINISHED:
        return None
    took = f" in {run.duration_s:.1f} s" if run.duration_s is not None else ""
    line = f"run {run.short_id} {FINISHED[run.status]}{took}: {target}"
    if materialized:
        line += f"; materialized {', '.join(sorted(materialized))}"
    if run.status == "FAILURE":
        line += f": {error or 'no error recorded'}"
        if where:
            line += f"; {where}"
    return line


def run_view(
    run_id: str,
    status: str,
    tags: Mapping[str, str],
    assets: list[str],
    job_name: str,
    start_time: float | None,
    end_time: float | None,
    range_label: Callable[[Mapping[str, str]], str | None],
) -> RunView:
    requested_by = tags.get(SENSOR_TAG) or tags.get(SCHEDULE_TAG)
    if not requested_by and BACKFILL_TAG in tags:
        requested_by = f"backfill {tags[BACKFILL_TAG]}"
    if not requested_by and tags.get("flokit/refresh"):
        requested_by = "flokit refresh"
    duration = end_time - start_time if start_time is not None and end_time is not None else None
    return RunView(
        run_id,
        status,
        ", ".join(sorted(assets)) or job_name,
        range_label(tags) or tags.get(PARTITION_TAG),
        requested_by,
        duration,
    )


def first_line(text: str) -> str:
    line = next((part.strip() for part in text.strip().splitlines() if part.strip()), "")
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 3] + "..."


class RunWatch:
    """A supervisor check that prints a line per run started or finished, and per sensor that
    starts failing or recovers, read from the Dagster instance at `home` every `poll_s`.

    Never a reason to stop: the instance may be briefly unreadable (SQLite locked while a run
    writes); that is said once, and the watch goes on.
    """

    def __init__(
        self,
        home: Path,
        ui_url: str,
        daemon_log: Path,
        poll_s: float = 2.0,
        sensors_every_s: float = 10.0,
        stuck_after: dt.timedelta = STUCK_AFTER,
    ) -> None:
        self.home = home
        self.stuck_after = stuck_after
        self.ui_url = ui_url
        self.daemon_log = daemon_log
        self.poll_s = poll_s
        self.sensors_every_s = sensors_every_s
        self.since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        self.reported: dict[str, tuple[str, dt.datetime]] = {}  # run id -> (status reported, updated at)
        self.failing: dict[str, float] = {}  # sensor name -> timestamp of the failed tick reported
        self.instance: dg.DagsterInstance | None = None
        self.next_poll = 0.0
        self.next_sensors = 0.0
        self.unreadable = False
        self.stuck_since: dt.datetime | None = None  # the oldest stuck run reported, while some are

    def __call__(self, now: float) -> None:
        if now < self.next_poll:
            return
        self.next_poll = now + self.poll_s
        try:
            lines = self.runs()
            if now >= self.next_sensors:
                self.next_sensors = now + self.sensors_every_s
                lines += self.dead() + self.sensors() + self.stuck()
        except Exception as exc:  # whatever the storage raises; the next poll tries again
            if not self.unreadable:
                self.unreadable = True
                log(f"cannot read the Dagster instance for now ({type(exc).__name__}: {first_line(str(exc))})")
            return
        if self.unreadable:
            self.unreadable = False
            log("the Dagster instance is readable again")
        for line in lines:
            log(line)

    def _instance(self) -> dg.DagsterInstance:
        if self.instance is None:
            import dagster as dg

            self.instance = dg.DagsterInstance.from_config(str(self.home))
        return self.instance

    def runs(self) -> list[str]:
        import dagster as dg

        from orchestration.partitions import range_label

        instance = self._instance()
        records = instance.get_run_records(
            filters=dg.RunsFilter(updated_after=self.since), order_by="update_timestamp", ascending=True, limit=200
        )
        lines = []
        for record in records:
            run = record.dagster_run
            status = run.status.value
            updated = record.update_timestamp
            # Overlapping windows (updated_after is strict and clocks are coarse): each status once.
            if self.reported.get(run.run_id, ("", updated))[0] == status:
                continue
            assets = [key.to_user_string() for key in run.asset_selection or ()]
            view = run_view(
                run.run_id, status, run.tags, assets, run.job_name, record.start_time, record.end_time, range_label
            )
            materialized = self._materialized(instance, run.run_id) if status in FINISHED else None
            error = self._failure(instance, run.run_id) if status == "FAILURE" else None
            where = f"details: {self.ui_url}/runs/{run.run_id} and {self.daemon_log}"
            line = run_line(view, materialized, error, where)
            if line:
                lines.append(line)
            self.reported[run.run_id] = (status, updated)
        if records:
            newest = max(r.update_timestamp for r in records)
            self.since = max(self.since, newest - dt.timedelta(seconds=2))
            cutoff = self.since - dt.timedelta(minutes=10)
            self.reported = {k: v for k, v in self.reported.items() if v[1] >= cutoff}
        return lines

    def _materialized(self, instance: dg.DagsterInstance, run_id: str) -> list[str]:
        import dagster as dg

        found = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        keys = {r.event_log_entry.dagster_event.asset_key for r in found if r.event_log_entry.dagster_event}
        return sorted(key.to_user_string() for key in keys if key is not None)

    def _failure(self, instance: dg.DagsterInstance, run_id: str) -> str | None:
        """The first failed step and its error, or the run's own failure message."""
        import dagster as dg

        for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
            event: Any = entry.dagster_event
            error: Any = getattr(getattr(event, "event_specific_data", None), "error", None)
            while getattr(error, "cause", None) is not None:  # Dagster's wrapper around the user's error
                error = error.cause
            message = first_line(getattr(error, "message", "") or entry.message or "")
            return f"step {event.step_key} failed: {message}" if event and event.step_key else message
        for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_FAILURE):
            return first_line(entry.message or "")
        return None

    def sensors(self) -> list[str]:
        instance = self._instance()
        lines = []
        for state in instance.all_instigator_state():
            if state.instigator_type.value != "SENSOR":
                continue
            ticks = instance.get_ticks(state.instigator_origin_id, state.selector_id, limit=1)
            if not ticks:
                continue
            tick, name = ticks[0], state.instigator_name
            if tick.status.value == "FAILURE":
                if name not in self.failing:
                    message = first_line(tick.error.message) if tick.error else "no error recorded"
                    lines.append(f"sensor {name} failed: {message}; details: {self.ui_url}/automation")
                self.failing[name] = tick.timestamp
            elif name in self.failing and tick.status.value in ("SUCCESS", "SKIPPED"):
                del self.failing[name]
                lines.append(f"sensor {name} works again")
        return lines

    def dead(self) -> list[str]:
        """Fail the unfinished runs whose process on this host is gone; a line for each. The
        daemon's runs count too: `flokit up` runs that daemon, so their workers run here."""
        from orchestration.liveness import fail_dead_runs

        return [
            f"run {d.run_id[:8]} ({d.job_name}) marked failed: {d.reason}; its run slot is free again"
            for d in fail_dead_runs(self._instance(), launched_here=True)
        ]

    def stuck(self) -> list[str]:
        """A line when runs have waited in the queue past STUCK_AFTER (once, until it moves), naming
        the runs in progress that hold the slots; a line when nothing waits that long any more."""
        import dagster as dg

        instance = self._instance()
        waiting = instance.get_runs(
            dg.RunsFilter(
                statuses=[dg.DagsterRunStatus.QUEUED], created_before=dt.datetime.now(dt.UTC) - self.stuck_after
            )
        )
        if not waiting:
            if self.stuck_since is None:
                return []
            self.stuck_since = None
            return ["the run queue moves again"]
        if self.stuck_since is not None:
            return []
        self.stuck_since = dt.datetime.now(dt.UTC)
        holding = instance.get_runs(
            dg.RunsFilter(
                statuses=[dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
            ),
            limit=10,
        )
        held = ", ".join(f"{r.run_id[:8]} {r.job_name} ({r.status.value})" for r in holding) or "none"
        minutes = int(self.stuck_after.total_seconds() // 60)
        return [
            f"{len(waiting)} run(s) queued for over {minutes} min: runs stuck? in progress: {held}. A run of a dead "
            f"process on this host is failed here; end any other in the Dagster UI ({self.ui_url}/runs)"
        ]

    def close(self) -> None:
        if self.instance is not None:
            self.instance.dispose()
            self.instance = None
