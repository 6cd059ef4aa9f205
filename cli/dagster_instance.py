"""The Dagster instance at DAGSTER_HOME: created and migrated once, checked, repaired.

Every Dagster process (webserver, daemon, each of their code servers) creates the instance's
storages when it finds them missing. On SQLite that creation is not safe to run concurrently:
one process creates the tables, another sees tables without an `alembic_version` row and stamps
an older revision, the first stamps head, and the storage ends with two rows. Dagster then
refuses to load it ("more than one head present"): the code location never loads and the daemon
exits at start, on every start after. Measured: four concurrent `DagsterInstance.get()` on an
empty home left a storage with two rows in 4 of 6 trials, and so did one `flokit up` in two.

So `flokit up` creates and migrates the instance itself, alone, before any child starts
(`prepare_instance`): the children then find every storage stamped and never initialise one.
An instance damaged before this fix is detected (`find_damaged`) and repaired
(`repair_instance`, `flokit dagster repair`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import io
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # loaded lazily: `flokit --help` need not import Alembic
    from alembic.script import ScriptDirectory

ROOT = Path(__file__).resolve().parents[1]
DEV_INSTANCE = ROOT / "orchestration" / "instance" / "dagster.dev.yaml"
# Held for the whole life of `flokit up`, so a second `flokit up` or a repair on the same
# instance fails loudly instead of racing the running service.
RUNNING_LOCK = ".flokit-up.lock"
# Held while the instance is created or migrated, so two preparations queue.
INIT_LOCK = ".flokit-init.lock"
REPAIR_COMMAND = "flokit dagster repair"
MONITORING_OFF = (
    "run monitoring is OFF in {config}: copy its run_monitoring block from "
    "orchestration/instance/dagster.dev.yaml (docs/reliability.md), or a killed run may block the queue"
)


class InstanceBusy(RuntimeError):
    """Another `flokit up` (or a repair) holds the instance."""


class InstanceDamaged(RuntimeError):
    """A storage of the instance has more than one `alembic_version` row; Dagster cannot load it."""

    def __init__(self, home: Path, damaged: list[Storage]) -> None:
        self.home = home
        self.damaged = damaged
        listed = "; ".join(f"{s.path.relative_to(home)} has {len(s.revisions)} rows {s.revisions}" for s in damaged)
        super().__init__(
            f"the Dagster instance at {home} is damaged: alembic_version must hold one row, but {listed} "
            f"(left by Dagster processes initialising a new instance at once). Repair it with "
            f"`{REPAIR_COMMAND}` while flokit up is stopped (docs/reliability.md)."
        )


@dataclass(frozen=True)
class Storage:
    """One SQLite file of the instance and the revisions its `alembic_version` holds."""

    path: Path
    revisions: list[str]

    @property
    def damaged(self) -> bool:
        return len(self.revisions) > 1


@dataclass(frozen=True)
class Repaired:
    path: Path
    revisions: list[str]
    kept: str
    backup: Path


def ensure_dagster_home(home: Path) -> Path:
    """DAGSTER_HOME with the development dagster.yaml when it has none (an operator's stays)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(DEV_INSTANCE, config)
    return config


def sqlite_storages(home: Path) -> list[Storage]:
    """Every SQLite file under DAGSTER_HOME with an `alembic_version` table: runs, schedules, the
    event log's index and each run's event-log shard. Empty for an instance on PostgreSQL."""
    found = []
    for path in sorted(home.rglob("*.db")):
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            rows = con.execute("SELECT version_num FROM alembic_version").fetchall()
        except sqlite3.DatabaseError:
            continue  # not a Dagster storage (no alembic_version table), or not SQLite at all
        finally:
            con.close()
        found.append(Storage(path, sorted(row[0] for row in rows)))
    return found


def find_damaged(home: Path) -> list[Storage]:
    return [s for s in sqlite_storages(home) if s.damaged]


@contextlib.contextmanager
def holding(home: Path, name: str, *, wait: bool) -> Iterator[None]:
    """An exclusive lock on a file in DAGSTER_HOME, released when the process ends, even killed.
    Without `wait`, a held lock raises InstanceBusy naming the holder's pid."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / name, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise InstanceBusy(f"the Dagster instance at {home} is in use by flokit process {holder}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def prepare_instance(home: Path) -> list[str]:
    """Create the instance's storages when missing and migrate them like `dagster instance
    migrate`, alone; refuse a damaged instance. Returns what was done, for the log.

    Migrating walks every run's event-log shard (docs/benchmarks.md), so it runs only when some
    storage is not at Dagster's head revision: on a new instance or after a Dagster upgrade.
    """
    ensure_dagster_home(home)
    with holding(home, INIT_LOCK, wait=True):
        damaged = find_damaged(home)
        if damaged:
            raise InstanceDamaged(home, damaged)
        fresh = not sqlite_storages(home)

        from dagster import DagsterInstance  # deferred: importing Dagster costs seconds

        with DagsterInstance.from_config(str(home)) as instance:
            head = head_revision()
            # The SQLite files (each run's event-log shard included), and each storage as Dagster
            # sees it (on PostgreSQL that is all there is): (revision in the database, head).
            stale = [s for s in sqlite_storages(home) if s.revisions != [head]]
            versions = [instance.run_storage.alembic_version(), instance.event_log_storage.alembic_version()]
            if instance.schedule_storage is not None:
                versions.append(instance.schedule_storage.alembic_version())
            behind = [v for v in versions if v is not None and v[0] != v[1]]
            # An instance configured before run monitoring was added to the config FloKit writes
            # keeps its dagster.yaml (an operator's file is never rewritten): say so at each start.
            notes = [] if instance.run_monitoring_enabled else [MONITORING_OFF.format(config=home / "dagster.yaml")]
            if not stale and not behind:
                return ["created" if fresh else "at head", *notes]
            # Dagster prints its progress (and a progress bar per run shard): keep the log readable.
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                instance.upgrade()
        return ["created" if fresh else "existing", f"migrated to {head}", *notes]


def repair_instance(home: Path) -> list[Repaired]:
    """Make every damaged storage hold one `alembic_version` row again; `prepare_instance` then
    migrates the instance from there.

    Which row is right: both were stamped by processes of the same Dagster over tables that one
    of them created from the current schema, so the newest revision describes the tables; a
    migration from it (Dagster's migrations are guarded: they skip what exists) finishes the job.
    Each damaged file is copied beside itself first (SQLite's backup API, so the WAL is included).
    """
    head_order = _revisions_newest_first()
    repaired = []
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    with holding(home, INIT_LOCK, wait=True):
        for storage in find_damaged(home):
            unknown = [r for r in storage.revisions if r not in head_order]
            if unknown:
                raise RuntimeError(
                    f"{storage.path}: alembic_version holds {unknown}, which this Dagster does not know; "
                    "install the Dagster version that wrote it, then repair"
                )
            kept = next(r for r in head_order if r in storage.revisions)
            backup = storage.path.with_name(f"{storage.path.name}.bak-{stamp}")
            con = sqlite3.connect(storage.path, timeout=30)
            try:
                with sqlite3.connect(backup) as copy:
                    con.backup(copy)
                with con:
                    con.execute("DELETE FROM alembic_version")
                    con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (kept,))
            finally:
                con.close()
            repaired.append(Repaired(storage.path, storage.revisions, kept, backup))
    return repaired


# Every Dagster storage (runs, event log, schedules) migrates with the one Alembic script that
# Dagster ships as package data. Named by its location rather than imported from
# `dagster._core`, whose modules are Dagster's private API.
DAGSTER_ALEMBIC_SCRIPTS = "dagster:_core/storage/alembic"


def _alembic_script() -> ScriptDirectory:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", DAGSTER_ALEMBIC_SCRIPTS)
    return ScriptDirectory.from_config(config)


def head_revision() -> str:
    """The alembic head of the installed Dagster: where every storage must be after `prepare_instance`."""
    head = _alembic_script().get_current_head()
    assert head is not None, "Dagster's migration history has one head"
    return head


def _revisions_newest_first() -> list[str]:
    return [revision.revision for revision in _alembic_script().walk_revisions("base", "heads")]
