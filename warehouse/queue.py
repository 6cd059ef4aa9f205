"""A table of work rows that Dagster runs: the one shape of "a row asks for work, a run ends it".

An integration's sync (`integration_syncs`) and an ad account's "sync now" request
(`ad_account_sync_requests`) are the same queue with other names: a row is inserted waiting
(`queued` / `pending`) for a subject (the integration, the ad account), at most one open row per
subject (a database uniqueness rule the two tables spell differently); a run claims it
(waiting -> `running`, with the run id); the run, the failure sensor or the sweep ends it once.
`WorkQueue` holds that logic once; each stack's repository keeps its own row type, its own side
effects (the integration's status, the account's) and its own wording.

Every method works in the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from warehouse.errors import TransitionRefused


@dataclass(frozen=True)
class Subject:
    """What a row asks work for: its id, its status now, and its name in a refusal."""

    label: str  # "Integration", "Ad account"
    id: str
    status: str


@dataclass(frozen=True)
class WorkQueue:
    """One queue table: `subject` the column naming what the work is for, `waiting` the status of
    a row no run has taken yet, `ordered_by` the column of its request time."""

    table: sa.Table
    subject: str
    waiting: str
    ordered_by: str

    @property
    def open_statuses(self) -> tuple[str, str]:
        return (self.waiting, "running")

    def get(self, conn: Connection, row_id: str) -> Row[Any] | None:
        return conn.execute(self.table.select().where(self.table.c.id == row_id)).first()

    def open_for(self, conn: Connection, subject_id: str) -> Row[Any] | None:
        """The subject's open (waiting or running) row, if any."""
        t = self.table
        return conn.execute(
            t.select().where(t.c[self.subject] == subject_id, t.c.status.in_(self.open_statuses))
        ).first()

    def insert_once(self, conn: Connection, subject: Subject, values: dict[str, Any]) -> tuple[Row[Any], bool]:
        """Insert a waiting row for the subject; `(row, True)`, or `(the open row, False)` while one
        is open. A disconnected subject cannot sync (`TransitionRefused`: it has no credentials).
        Two concurrent inserts race on the table's uniqueness rule: the loser reads the winner's
        row instead of queuing a second one."""
        if subject.status == "disconnected":
            raise TransitionRefused(
                f"{subject.label} {subject.id} is disconnected; connect it again before syncing", "disconnected"
            )
        subject_id = subject.id
        found = self.open_for(conn, subject_id)
        if found is not None:
            return found, False
        try:
            with conn.begin_nested():
                conn.execute(self.table.insert().values(status=self.waiting, **{self.subject: subject_id}, **values))
        except sa.exc.IntegrityError:
            found = self.open_for(conn, subject_id)
            if found is None:
                raise
            return found, False
        row = self.get(conn, values["id"])
        assert row is not None
        return row, True

    def with_status(self, conn: Connection, statuses: Sequence[str]) -> list[Row[Any]]:
        """The rows in these statuses, oldest request first."""
        t = self.table
        order = (t.c[self.ordered_by], t.c.id)
        return list(conn.execute(t.select().where(t.c.status.in_(list(statuses))).order_by(*order)))

    def history(self, conn: Connection, subject_id: str, limit: int) -> list[Row[Any]]:
        """The subject's rows, newest first."""
        t = self.table
        return list(
            conn.execute(
                t.select()
                .where(t.c[self.subject] == subject_id)
                .order_by(t.c[self.ordered_by].desc(), t.c.id.desc())
                .limit(limit)
            )
        )

    def claim(self, conn: Connection, row_id: str, run_id: str, now: datetime) -> bool:
        """Waiting -> `running` under this run; False when it is no longer waiting (another run
        took it, or it was ended meanwhile): the caller then has nothing to do."""
        t = self.table
        taken = conn.execute(
            t.update()
            .where(t.c.id == row_id, t.c.status == self.waiting)
            .values(status="running", run_id=run_id[:64], started_at=now)
        ).rowcount
        return bool(taken)

    def end(self, conn: Connection, row_id: str, now: datetime, allowed: Sequence[str], values: dict[str, Any]) -> bool:
        """End the row (`finished_at` = now and `values`) if its status is one of `allowed`;
        False when it had already ended (the caller says so in its own words)."""
        t = self.table
        done = conn.execute(
            t.update().where(t.c.id == row_id, t.c.status.in_(list(allowed))).values(finished_at=now, **values)
        ).rowcount
        return bool(done)
