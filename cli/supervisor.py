"""Supervision of `flokit up`'s children: a dead child is restarted, a crash loop stops everything.

The API must keep serving when the Dagster daemon or webserver dies (a killed daemon only delays
sensors and schedules), so one death no longer stops the service: the child is restarted after a
backoff that doubles from 1 s to 30 s and starts again at 1 s once the child stayed up a minute.
A child that keeps dying (5 deaths within 10 minutes) is not going to recover by itself; then
everything stops with the reason, exit status 1, for an operator or a process manager to see.

`RestartPolicy` and `Restarts` are the decisions, pure and unit-tested; `Supervisor` applies them
to real processes. Each child runs in its own session (process group), so a terminal's Ctrl-C
reaches only `flokit up`, and what a child started (gunicorn workers, Dagster code servers and
runs) is stopped with it: after a death its group gets SIGTERM, and SIGKILL after the child's
`orphan_grace_s`, and the child is started again only once every process of the group is gone.
Gunicorn's is 0: a master killed with SIGKILL leaves workers that serve nothing new but keep its
listening socket while they drain, up to the 15 s graceful timeout, and a master started meanwhile
cannot bind the port; killed at once, the restart binds on its first attempt.

A child given a `log_path` writes its output there (appended, owner-only) instead of to the
console; with `echo`, a thread per child copies it to the console as well (`flokit up --verbose`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, BinaryIO

import click

# A check run on every tick of the loop, given the monotonic time: a reason to stop everything,
# or None while all is well.
Check = Callable[[float], str | None]
# After SIGKILL a process ends at once unless it waits in the kernel (a hung disk or NFS): a
# group still there after this long is given up on, and the child restarted anyway.
KILLED_GONE_S = 5.0
LOG_DIR_MODE = 0o700
LOG_FILE_MODE = 0o600


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 1.0
    max_delay_s: float = 30.0
    # A child that stayed up this long was healthy: its next restart waits first_delay_s again.
    healthy_after_s: float = 60.0
    # This many deaths of one child within window_s is a crash loop: stop everything.
    max_deaths: int = 5
    window_s: float = 600.0


@dataclass
class Restarts:
    """The death history of one child and what follows from it."""

    policy: RestartPolicy
    deaths: list[float] = field(default_factory=list)
    next_delay_s: float | None = None

    def after_death(self, died_at: float, up_for_s: float) -> float | None:
        """Seconds to wait before starting the child again; None for a crash loop."""
        self.deaths = [t for t in self.deaths if died_at - t < self.policy.window_s] + [died_at]
        if len(self.deaths) >= self.policy.max_deaths:
            return None
        if self.next_delay_s is None or up_for_s >= self.policy.healthy_after_s:
            self.next_delay_s = self.policy.first_delay_s
        delay = self.next_delay_s
        self.next_delay_s = min(self.policy.max_delay_s, delay * 2)
        return delay


def describe_exit(returncode: int) -> str:
    """`exit status 1` or `killed by SIGKILL (signal 9)`: what an operator needs to tell a crash
    from an OOM kill or a stray signal."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by {name} (signal {-returncode})"
    return f"exit status {returncode}"


# Who the supervisor lines speak for: `flokit up`, or the `flokit serve <role>` that set it.
_speaker = "flokit up"


def speak_as(command: str) -> None:
    """Name the command in this process's supervisor lines (from any thread)."""
    global _speaker
    _speaker = command


def log(message: str) -> None:
    """One supervisor line on stderr, timestamped like nothing else in the mixed log."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    click.echo(f"{stamp} {_speaker}: {message}", err=True)


def open_log(path: Path) -> int:
    """A log file for appending (created owner-only: logs may name workspaces and URLs); a descriptor."""
    path.parent.mkdir(mode=LOG_DIR_MODE, parents=True, exist_ok=True)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, LOG_FILE_MODE)


_console_lock = threading.Lock()


def _pump(source: IO[bytes], log_fd: int, console: BinaryIO | None) -> None:
    """Copy a child's output to its log file and to the console until every writer closed it."""
    with source:
        for chunk in iter(lambda: os.read(source.fileno(), 65536), b""):
            os.write(log_fd, chunk)
            if console is not None:
                try:
                    with _console_lock:
                        console.write(chunk)
                        console.flush()
                except (OSError, ValueError):  # the terminal went away: the log file still gets it all
                    console = None
    os.close(log_fd)


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path | None = None  # None: the child writes to the console
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None  # set while the child is dead and waiting for its restart
    # How long what a dead leader left (its process group) gets to finish after SIGTERM before
    # SIGKILL; None: the supervisor's grace period. 0: SIGKILL at once (gunicorn's orphaned workers).
    orphan_grace_s: float | None = None
    remnants: int | None = None  # process group of a dead leader whose members may still run
    remnants_deadline: float = 0.0
    remnants_killed: bool = False  # SIGKILL sent; waiting for the group to be gone
    restarts: Restarts | None = None


class Supervisor:
    """Starts the children, restarts the dead ones, stops them all."""

    def __init__(
        self,
        children: Sequence[Child],
        env: dict[str, str],
        cwd: Path,
        policy: RestartPolicy,
        grace_s: float,
        echo: bool = False,
    ) -> None:
        self.children = list(children)
        self.env = env
        self.cwd = cwd
        self.policy = policy
        self.grace_s = grace_s
        self.echo = echo  # copy the output of children with a log file to the console too
        for child in self.children:
            child.restarts = Restarts(policy)

    def start_all(self) -> None:
        now = time.monotonic()
        for child in self.children:
            self._start(child, now)  # a failed first start is retried by `tick` like a death

    def run(self, should_stop: Callable[[], bool], checks: Sequence[Check] = (), tick_s: float = 0.5) -> str | None:
        """Supervise until `should_stop()` (None: a requested stop) or a reason to stop everything."""
        while not should_stop():
            now = time.monotonic()
            reason = self.tick(now)
            for check in checks:
                reason = reason or check(now)
            if reason:
                return reason
            time.sleep(tick_s)
        return None

    def tick(self, now: float) -> str | None:
        """Notice deaths, clean up after them, restart what is due; a crash loop's reason."""
        for child in self.children:
            if child.process is not None and child.process.poll() is not None:
                reason = self._died(child, now)
                if reason:
                    return reason
            if child.remnants is not None:
                self._reap_remnants(child, now)
            if child.restart_at is not None and now >= child.restart_at and child.remnants is None:
                reason = self._start(child, now)
                if reason:
                    return reason
        return None

    def _died(self, child: Child, now: float) -> str | None:
        assert child.process is not None and child.restarts is not None
        process, child.process = child.process, None
        how = describe_exit(process.returncode)
        # Whatever it started (workers, a code server, a run) gets SIGTERM now and SIGKILL after
        # its grace period; the child is started again only once its old group is gone.
        grace = self.grace_s if child.orphan_grace_s is None else child.orphan_grace_s
        child.remnants, child.remnants_deadline, child.remnants_killed = process.pid, now + grace, False
        if grace > 0:
            _signal_group(process.pid, signal.SIGTERM)
        else:
            child.remnants_killed, child.remnants_deadline = True, now + KILLED_GONE_S
            _signal_group(process.pid, signal.SIGKILL)
        delay = child.restarts.after_death(now, now - child.started_at)
        if delay is None:
            return (
                f"{child.name} died {self.policy.max_deaths} times within {self.policy.window_s:.0f} s "
                f"(last: {how}); a crash loop, stopping everything{_see(child)}"
            )
        child.restart_at = now + delay
        log(
            f"{child.name} (pid {process.pid}) died: {how}; restarting in {delay:.0f} s "
            f"(death {len(child.restarts.deaths)} of {self.policy.max_deaths} allowed "
            f"within {self.policy.window_s:.0f} s){_see(child)}"
        )
        return None

    def _reap_remnants(self, child: Child, now: float) -> None:
        assert child.remnants is not None
        if not _group_alive(child.remnants):
            child.remnants = None
        elif now < child.remnants_deadline:
            return
        elif not child.remnants_killed:
            log(f"processes left by {child.name} did not stop in time; killing them")
            _signal_group(child.remnants, signal.SIGKILL)
            child.remnants_killed, child.remnants_deadline = True, now + KILLED_GONE_S
        else:  # killed, and still there: stuck in the kernel; restart anyway
            log(f"processes left by {child.name} survive SIGKILL (group {child.remnants}); restarting anyway")
            child.remnants = None

    def _start(self, child: Child, now: float) -> str | None:
        restarting = child.restart_at is not None
        child.restart_at, child.started_at = None, now
        log_fd = open_log(child.log_path) if child.log_path is not None else None
        output: int | None = None if log_fd is None else subprocess.PIPE if self.echo else log_fd
        try:
            child.process = subprocess.Popen(
                child.argv,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                stdout=output,
                stderr=None if output is None else subprocess.STDOUT,
            )
        except OSError as exc:  # the executable vanished: counts as a death like any other
            if log_fd is not None:
                os.close(log_fd)
            assert child.restarts is not None
            delay = child.restarts.after_death(now, 0.0)
            if delay is None:
                return f"{child.name} could not start {self.policy.max_deaths} times: {exc}; stopping everything"
            log(f"{child.name} could not start: {exc}; trying again in {delay:.0f} s")
            child.restart_at = now + delay
            return None
        if log_fd is not None:
            if self.echo:
                assert child.process.stdout is not None
                threading.Thread(
                    target=_pump,
                    args=(child.process.stdout, log_fd, sys.stdout.buffer),
                    name=f"{child.name}-output",
                    daemon=True,
                ).start()
            else:
                os.close(log_fd)  # the child holds its own copy
        if restarting:
            log(f"{child.name} restarted (pid {child.process.pid})")
        return None

    def stop_all(self) -> None:
        """SIGTERM to every child's group, each waited for within the grace period, then SIGKILL:
        nothing FloKit started outlives `flokit up`."""
        groups = [(c.name, c.process, c.process.pid if c.process else c.remnants) for c in self.children]
        for _name, _process, pgid in groups:
            if pgid is not None:
                _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for name, process, pgid in groups:
            if process is not None:
                try:
                    process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    click.echo(f"{name} did not stop in {self.grace_s:.0f}s; killing it", err=True)
                    _signal_group(process.pid, signal.SIGKILL)
                    process.wait()
            # Its own children too (a Dagster run the daemon launched, gunicorn workers): they got
            # the SIGTERM with the group and finish their step.
            if pgid is not None and not _group_gone(pgid, deadline):
                click.echo(f"processes of {name} did not stop in {self.grace_s:.0f}s; killing them", err=True)
                _signal_group(pgid, signal.SIGKILL)


def _see(child: Child) -> str:
    return f"; its log: {child.log_path}" if child.log_path is not None else ""


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A zombie does not count: where PID 1 does not
    reap orphans (some containers), `kill(-pgid, 0)` would report a group of zombies alive."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses, so split after it
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _group_gone(pgid: int, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if not _group_alive(pgid):
            return True
        time.sleep(0.1)
    return not _group_alive(pgid)


def stop_requested() -> Callable[[], bool]:
    """Catch Ctrl-C and SIGTERM from now on; the returned check says whether one has come, for
    `Supervisor.run` to stop everything in order instead of dying mid-way."""
    requested = threading.Event()

    def _stop(_signum: int, _frame: object) -> None:
        requested.set()

    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    return requested.is_set
