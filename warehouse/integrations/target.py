"""Where a sync writes: the existing paths only, with the bookkeeping every connector needs.

A connector never touches the database or the lake itself. It hands canonical events to
`land_events` (landing, so dedup, the lake and the reports treat them like any other source)
and spend to `replace_spend` (the spend writer), and reports exported rows with `exported`.
The target counts what was written (`records`, the sync row's `records_written`) and keeps the
integration's `state` (cursors and high-water marks), which the framework persists only when
the sync succeeds, so a failed sync is simply done again.

Landing's dedup claims live 30 days (`prune_claims`). A re-pull or a backfill that reaches
further back than that would land again what was landed before the claims were pruned, so the
target keeps a per-integration high-water mark: for each day a sync landed events, the latest
`occurred_at` it landed. An event no later than the mark of a day more than `CLAIM_SAFE_DAYS`
ago was landed then (its claim may be gone) and is skipped; anything newer is still covered by
its claim. An event that first appears at the provider more than that many days after it
occurred is therefore not landed: a provider that late is a provider bug, and the sync counts
such events in `skipped_settled` so that it shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import polars as pl

from transforms.events import CanonicalEvent
from transforms.reports.schemas import SPEND_SCHEMA
from warehouse.db import Database, utcnow
from warehouse.events.landing import land
from warehouse.lake import Lake
from warehouse.reports.report_lake import replace_spend_days

# Claims are pruned at 30 days by a daily job: one day of margin for the prune's schedule.
CLAIM_SAFE_DAYS = 29
_MARKS = "landed_marks"  # state key: {"YYYY-MM-DD" (day landed): ISO occurred_at (latest landed)}
_FLOOR = "settled_before"
# State key: {"YYYY-MM-DD": spend rows the integration holds for that day}; its `sync_stats`.
SPEND_ROWS = "spend_rows"  # state key: ISO occurred_at; everything at or before it was landed long ago
# Events per landing transaction: one transaction per batch keeps a large backfill from holding
# the database's write lock for long (ingest callbacks wait behind it on SQLite).
LAND_BATCH = 1000


@dataclass
class SyncTarget:
    database: Database
    lake: Lake
    workspace_id: str
    integration_id: str
    integration_type: str
    state: dict[str, Any] = field(default_factory=dict)
    now: datetime = field(default_factory=utcnow)
    records: int = 0
    duplicates: int = 0
    skipped_settled: int = 0
    earliest: datetime | None = None
    # The instance key, for a connector whose credentials are sealed elsewhere (an app's Google
    # service account in `app_stores`); None where the caller has none.
    instance_key: str | None = field(default=None, repr=False)

    @property
    def source(self) -> str:
        """The `source` of the events it lands: the integration type, which is also the ingest
        vendor's name for the attribution kinds, so `sync_stats` counts both together."""
        return self.integration_type

    def land_events(self, events: Sequence[CanonicalEvent]) -> int:
        """Land events (deterministic ids, so a webhook and a sync of the same fact land once);
        returns how many were new."""
        floor = self._floor()
        fresh = [e for e in events if floor is None or e.occurred_at > floor]
        self.skipped_settled += len(events) - len(fresh)
        written = 0
        for i in range(0, len(fresh), LAND_BATCH):
            batch = fresh[i : i + LAND_BATCH]
            with self.database.write() as conn:
                result = land(conn, batch)
            written += len(result.written)
            self.duplicates += len(result.duplicate)
            landed = {*result.written}
            for event in batch:
                if event.event_id in landed:
                    self._mark(event.occurred_at)
        self.records += written
        return written

    def replace_spend(self, frame: pl.DataFrame, days: Sequence[date]) -> int:
        """Make `frame` the workspace's whole spend of each of `days` (the window the provider
        was asked for): restated figures replace the old ones, a campaign whose spend vanished
        from a restated day vanishes too, and syncing the same window twice changes nothing."""
        rows = frame.select(list(SPEND_SCHEMA)).cast(dict(SPEND_SCHEMA))  # type: ignore[arg-type]
        wrong = rows.filter(pl.col("workspace_id") != self.workspace_id).height
        if wrong:
            raise ValueError(f"{wrong} spend rows are for another workspace than {self.workspace_id}")
        replace_spend_days(self.lake, self.workspace_id, list(days), rows)
        self.records += rows.height
        held: dict[str, int] = self.state.setdefault(SPEND_ROWS, {})
        counts = dict(rows.group_by("spend_date").len().iter_rows())
        for day in days:
            held[day.isoformat()] = int(counts.get(day, 0))
            if not held[day.isoformat()]:
                del held[day.isoformat()]
        if rows.height:
            first = rows.get_column("spend_date").min()
            assert isinstance(first, date)
            self._earliest(datetime(first.year, first.month, first.day, tzinfo=self.now.tzinfo))
        return rows.height

    def exported(self, rows: int, earliest: datetime | None = None) -> None:
        """Rows an export wrote to the customer's storage (the warehouse kind's records)."""
        self.records += rows
        if earliest is not None:
            self._earliest(earliest)

    def _earliest(self, moment: datetime) -> None:
        if self.earliest is None or moment < self.earliest:
            self.earliest = moment

    def _mark(self, occurred_at: datetime) -> None:
        self._earliest(occurred_at)
        marks: dict[str, str] = self.state.setdefault(_MARKS, {})
        today = self.now.date().isoformat()
        if today not in marks or datetime.fromisoformat(marks[today]) < occurred_at:
            marks[today] = occurred_at.isoformat()

    def _floor(self) -> datetime | None:
        """The settled mark (folding marks older than the claims into it, so state stays small)."""
        marks: dict[str, str] = self.state.setdefault(_MARKS, {})
        limit = self.now.date() - timedelta(days=CLAIM_SAFE_DAYS)
        floor = datetime.fromisoformat(self.state[_FLOOR]) if _FLOOR in self.state else None
        for day in [d for d in marks if date.fromisoformat(d) <= limit]:
            mark = datetime.fromisoformat(marks.pop(day))
            floor = mark if floor is None or mark > floor else floor
        if floor is not None:
            self.state[_FLOOR] = floor.isoformat()
        return floor
