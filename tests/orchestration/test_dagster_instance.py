"""The Dagster instance is created once, before any Dagster process; damage is refused and repaired.

Real Dagster, real SQLite files, real processes: what `flokit up` starts at once (webserver,
daemon, their code servers) is played by four processes that call `DagsterInstance.get()` on the
same DAGSTER_HOME at the same instant.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.dagster_instance import (
    InstanceDamaged,
    find_damaged,
    head_revision,
    prepare_instance,
    repair_instance,
    sqlite_storages,
)
from tests.support import ROOT

# Each process loads Dagster, says it is ready, waits for "go", then opens the instance.
GET_INSTANCE = """
import pathlib, sys, time
from dagster import DagsterInstance
home = pathlib.Path(sys.argv[1])
(home.parent / f"ready-{sys.argv[2]}").touch()
while not (home.parent / "go").exists():
    time.sleep(0.005)
DagsterInstance.get().dispose()
"""
PROCESSES = 4
ROUNDS = 3
HEAD = head_revision()
# The older revision a racing process stamps when it finds tables but no alembic_version row
# (Dagster's LAST_KNOWN_STAMPED_SQLITE_ALEMBIC_REVISION, written out: FloKit imports nothing
# from `dagster._core`; a revision of Dagster's history stays one as Dagster adds migrations).
OLDER = "5771160a95ad"


def open_concurrently(home: Path) -> list[subprocess.CompletedProcess[str]]:
    """PROCESSES processes call DagsterInstance.get() on `home` at once; their results."""
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GET_INSTANCE, str(home), str(i)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    deadline = time.monotonic() + 120
    while len(list(home.parent.glob("ready-*"))) < PROCESSES:
        assert time.monotonic() < deadline, "the processes did not load Dagster in 120 s"
        assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.02)
    (home.parent / "go").touch()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results


def test_processes_opening_a_prepared_instance_at_once_leave_every_storage_one_row(tmp_path: Path) -> None:
    """Before the fix (only dagster.yaml copied, as `flokit up` did) two runs of this test gave:
    2 and 1 of 3 rounds left history/runs.db with two rows (head and an older revision), and in
    every round of the second run 1 to 3 of the 4 processes died (IntegrityError on
    alembic_version). After `prepare_instance`, no round and no process does."""
    damaged_rounds = []
    for n in range(ROUNDS):
        home = tmp_path / f"round-{n}" / "dagster"
        prepare_instance(home)
        results = open_concurrently(home)
        rows = {str(s.path.relative_to(home)): s.revisions for s in sqlite_storages(home)}
        assert [r.returncode for r in results] == [0] * PROCESSES, [r.stderr[-2000:] for r in results]
        if any(len(revisions) != 1 for revisions in rows.values()):
            damaged_rounds.append(rows)
        assert set(rows) == {"history/runs.db", "history/runs/index.db", "schedules/schedules.db"}
        assert all(revisions == [HEAD] for revisions in rows.values()), rows
    assert not damaged_rounds


def damage(home: Path, storage: str = "history/runs.db") -> None:
    """What the race leaves: a second alembic_version row, an older revision beside head."""
    with sqlite3.connect(home / storage) as con:
        con.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (OLDER,))
    con.close()


def test_a_damaged_instance_is_refused_naming_the_storage_and_the_repair(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    prepare_instance(home)
    damage(home)
    with pytest.raises(InstanceDamaged) as refused:
        prepare_instance(home)
    message = str(refused.value)
    assert "history/runs.db has 2 rows" in message and "flokit dagster repair" in message


def test_repair_keeps_the_newest_revision_backs_the_file_up_and_dagster_loads_it(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    prepare_instance(home)
    damage(home)
    damage(home, "history/runs/index.db")

    repaired = repair_instance(home)

    assert sorted(str(r.path.relative_to(home)) for r in repaired) == ["history/runs.db", "history/runs/index.db"]
    assert all(r.kept == HEAD and r.revisions == sorted([HEAD, OLDER]) for r in repaired)
    for r in repaired:  # the damaged file as it was, for whoever wants to look
        with sqlite3.connect(r.backup) as con:
            assert sorted(row[0] for row in con.execute("SELECT version_num FROM alembic_version")) == r.revisions
        con.close()
    assert find_damaged(home) == []
    assert prepare_instance(home) == ["at head"]
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []


def test_a_storage_stamped_behind_head_is_migrated(tmp_path: Path) -> None:
    """The race can also leave one row with the older revision; preparing migrates it to head,
    like `dagster instance migrate`."""
    home = tmp_path / "dagster"
    prepare_instance(home)
    with sqlite3.connect(home / "schedules" / "schedules.db") as con:
        con.execute("UPDATE alembic_version SET version_num = ?", (OLDER,))
    con.close()

    assert prepare_instance(home) == ["existing", f"migrated to {HEAD}"]

    assert {tuple(s.revisions) for s in sqlite_storages(home)} == {(HEAD,)}
