"""The one shape of a queue job: a row asks for work, a sensor turns it into a run, a failure
sensor and a sweep end what died.

An integration's sync and an ad account's "sync now" request are both this (and whatever queue
comes next should be): the web app or a schedule writes a waiting row (`warehouse.queue`); the
request sensor asks for one run of the queue's job per waiting row, with `run_key` = the row id
(so a row is run at most once however often the sensor sees it) and the row id in a run tag; the
run claims the row and ends it. A run can die without ending its row, so the request sensor
first sweeps the open rows with `orchestration.abandoned`'s rule, and the run-failure sensor ends
a row at once when its run fails. `RunQueue` is the small spec a stack fills in (its job, tag,
warehouse reads and its way to fail a row); the sensors are built from it here, not written
again per stack.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, Protocol, TypeVar

import dagster as dg

from orchestration.abandoned import abandoned_reason
from orchestration.resources import DatabaseResource
from warehouse.db import Connection, Database, utcnow
from warehouse.errors import TransitionRefused


class QueueRow(Protocol):
    """What the sweep reads of a row: every queue table has these columns."""

    @property
    def id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def run_id(self) -> str | None: ...


R = TypeVar("R", bound=QueueRow)


@dataclass(frozen=True)
class RunQueue(Generic[R]):
    """A queue's spec. `run_requests` reads the waiting rows as run requests (`run_key` = the row
    id, the row id in the run tag `tag`); `open_rows` reads the rows the sweep checks;
    `fail(conn, row_id, reason)` ends one failed and returns it (`TransitionRefused` when it had
    already ended); `prepare` runs first on each tick (e.g. queue the scheduled work that is due)."""

    job: dg.JobDefinition  # `<thing>_job`: the sensors are `<thing>_sensor`, `<thing>_failure_sensor`
    tag: str  # the run tag that holds the row id
    max_running: timedelta  # longer than any run should take: past it, the run is presumed dead
    run_requests: Callable[[Connection], Sequence[dg.RunRequest]]
    open_rows: Callable[[Connection], Sequence[R]]
    fail: Callable[[Connection, str, str], R]
    idle: str  # the skip reason when nothing waits; `{swept}` is the sweep's count
    noun: str  # how the log names a row: "sync", "sync request"
    description: str
    failure_description: str
    prepare: Callable[[dg.SensorEvaluationContext, Database], None] | None = None
    # Whether a `running` row whose run id is not in the instance counts as abandoned.
    check_run_exists: bool = True

    def __post_init__(self) -> None:
        if not self.job.name.endswith("_job"):
            raise ValueError(f"a queue's job is named <thing>_job, not {self.job.name}")

    @property
    def thing(self) -> str:
        return self.job.name.removesuffix("_job")

    def fail_abandoned(self, instance: dg.DagsterInstance, db: Database) -> list[R]:
        """Mark failed every open row whose run ended, vanished, or has run longer than
        `max_running`; returns them as they ended."""
        now = utcnow()
        with db.read() as conn:
            rows = list(self.open_rows(conn))
        ended: list[R] = []
        for row in rows:
            reason = abandoned_reason(
                instance,
                tag=self.tag,
                row_id=row.id,
                status=row.status,
                started_at=row.started_at,
                now=now,
                max_running=self.max_running,
                run_id=row.run_id if self.check_run_exists else None,
            )
            if reason is not None and (failed := self._fail(db, row.id, reason)) is not None:
                ended.append(failed)
        return ended

    def sweep(self, instance: dg.DagsterInstance, database: DatabaseResource) -> int:
        """`fail_abandoned`, counted (what the request sensor reports)."""
        return len(self.fail_abandoned(instance, database.database()))

    def _fail(self, db: Database, row_id: str, reason: str) -> R | None:
        try:
            with db.write() as conn:
                return self.fail(conn, row_id, reason)
        except TransitionRefused:
            return None  # it ended meanwhile

    def request_sensor(self, minimum_interval_seconds: int) -> dg.SensorDefinition:
        """The request sensor; built at the composition root, whose interval is the deployment's
        FLOKIT_SENSOR_INTERVAL_S."""

        @dg.sensor(
            name=f"{self.thing}_sensor",
            job=self.job,
            minimum_interval_seconds=minimum_interval_seconds,
            default_status=dg.DefaultSensorStatus.RUNNING,
            description=self.description,
        )
        def request_sensor(
            context: dg.SensorEvaluationContext, database: DatabaseResource
        ) -> dg.SensorResult | dg.SkipReason:
            db = database.database()
            if self.prepare is not None:
                self.prepare(context, db)
            swept = self.sweep(context.instance, database)
            with db.read() as conn:
                run_requests = list(self.run_requests(conn))
            if not run_requests:
                return dg.SkipReason(self.idle.format(swept=swept))
            return dg.SensorResult(run_requests=run_requests)

        return request_sensor

    def failure_sensor(self) -> dg.RunFailureSensorDefinition:
        """The run-failure sensor: ends the failed run's row at once (a run without the tag, a
        scheduled one, has no row to end)."""

        @dg.run_failure_sensor(
            name=f"{self.thing}_failure_sensor",
            monitored_jobs=[self.job],
            default_status=dg.DefaultSensorStatus.RUNNING,
            description=self.failure_description,
        )
        def failure_sensor(context: dg.RunFailureSensorContext, database: DatabaseResource) -> None:
            row_id = context.dagster_run.tags.get(self.tag)
            if not row_id:
                return
            message = context.failure_event.message or "the run failed"
            reason = f"its run {context.dagster_run.run_id} failed: {message}"
            if self._fail(database.database(), row_id, reason) is not None:
                context.log.info(f"{self.noun} {row_id} marked failed")

        return failure_sensor
