"""`report.payback_updated` from real refreshes: real Dagster runs over a real lake, the real
published DuckDB store, the outbox on SQLite and PostgreSQL.

One event per workspace whose payback rows changed, with the cohort range that changed; none
when nothing changed; and a publish whose announcement failed (database unreachable after the
swap) is announced by the next run, once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest
import sqlalchemy as sa

from tests.reports_support import START, refresh
from transforms.demo import DemoConfig, generate
from transforms.timefmt import iso_z
from warehouse.db import Database, utcnow
from warehouse.lake import Lake
from warehouse.reports import demo, serving, store
from warehouse.reports.tables import payback_notified_digests
from warehouse.tables import workspaces
from warehouse.webhooks import endpoints
from warehouse.webhooks.payback_updates import notify_payback_updates
from warehouse.webhooks.tables import webhook_deliveries, webhook_events

DAYS = 30
GHOST = "ws_not_in_the_database"


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def add_workspace(db: Database, workspace_id: str) -> None:
    with db.write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=workspace_id, name=workspace_id, reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )


def events(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        bodies = conn.execute(
            sa.select(webhook_events.c.body)
            .where(webhook_events.c.type == "report.payback_updated")
            .order_by(webhook_events.c.created_at, webhook_events.c.id)
        ).scalars()
        return [json.loads(body) for body in bodies]


def cohort_range(lake: Lake, workspace_id: str) -> tuple[str, str]:
    days = store.scan_table(lake, store.PAYBACK).filter(pl.col("workspace_id") == workspace_id).select("cohort_date")
    frame = days.select(pl.col("cohort_date").min().alias("a"), pl.col("cohort_date").max().alias("b")).collect()
    return frame["a"][0].isoformat(), frame["b"][0].isoformat()


def late_charge(lake: Lake, history: pl.DataFrame, workspace_id: str, nth: int) -> date:
    """A renewal arriving late: a copy of the `nth` renewal of `workspace_id` under a new id,
    written into its day's partition with everything else of that day. Returns the cohort day
    (the renewing user's install day): the only cohort whose payback rows change."""
    renewals = history.filter((pl.col("workspace_id") == workspace_id) & (pl.col("event_type") == "renewal"))
    charge = renewals.sort("occurred_at")[nth]
    user = charge["user_id"][0]
    installed = history.filter(
        (pl.col("workspace_id") == workspace_id) & (pl.col("user_id") == user) & (pl.col("event_type") == "install")
    )["occurred_at"].min()
    day = charge["occurred_at"][0].date()
    same_day = history.filter(pl.col("occurred_at").dt.date() == day)
    copy = charge.with_columns(pl.lit(f"evt_late_{workspace_id}_{nth}").alias("event_id"))
    demo.write_event_partitions(lake, pl.concat([same_day, copy]))
    return installed.date()


def test_one_event_per_changed_workspace_with_the_cohort_range_that_changed(
    database_url: str, db: Database, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data_dir = tmp_path / "data"
    lake = Lake(data_dir / "lake")
    a, b = "ws_payback_a", "ws_payback_b"
    for ws in (a, b):
        add_workspace(db, ws)
    with db.write() as conn:  # a subscribed endpoint gets a delivery of each event
        endpoint, _ = endpoints.create_endpoint(
            conn, workspace_id=a, url="http://127.0.0.1:9/hook", events=["report.payback_updated"], allow_private=True
        )
    generated = [
        generate(DemoConfig(workspace_id=ws, users=300, days=DAYS, seed=seed, start=START))
        for seed, ws in enumerate((a, b, GHOST), start=3)
    ]
    history = pl.concat([g.events for g in generated]).sort("occurred_at")
    demo.write_event_partitions(lake, history)
    store.write_spend_raw(lake, pl.concat([g.spend for g in generated]))

    # The first publish: every workspace the database knows hears of its whole range, once.
    first = refresh(data_dir, database_url, instance)
    assert first is not None and first.success
    generated_at = serving.published_meta(data_dir / "reports.duckdb").generated_at
    assert generated_at is not None
    sent = events(db)
    assert sorted(e["workspace_id"] for e in sent) == [a, b]  # the lake-only workspace: nobody to tell
    for event in sent:
        start, end = cohort_range(lake, event["workspace_id"])
        assert event["data"] == {
            "report": "payback",
            "refreshed_at": iso_z(generated_at),
            "cohort_start_date": start,
            "cohort_end_date": end,
        }
    with db.read() as conn:
        queued = conn.execute(sa.select(webhook_deliveries.c.endpoint_id)).scalars().all()
    assert queued == [endpoint.id]

    # A refresh that recomputes days but changes no payback row announces nothing.
    some_day = START.replace(day=12)
    demo.write_event_partitions(lake, history.filter(pl.col("occurred_at").dt.date() == some_day))
    unchanged = refresh(data_dir, database_url, instance)
    assert unchanged is not None and unchanged.success
    assert len(events(db)) == 2

    # A late charge of one of a's users: one event, for a, with exactly that cohort day.
    cohort = late_charge(lake, history, a, 0)
    again = refresh(data_dir, database_url, instance)
    assert again is not None and again.success
    new = events(db)[2:]
    assert [(e["workspace_id"], e["data"]["cohort_start_date"], e["data"]["cohort_end_date"]) for e in new] == [
        (a, cohort.isoformat(), cohort.isoformat())
    ]
    refreshed = serving.published_meta(data_dir / "reports.duckdb").generated_at
    assert new[0]["data"]["refreshed_at"] == iso_z(refreshed) != iso_z(generated_at)


def test_an_announcement_lost_after_the_swap_is_made_by_the_next_run_once(
    database_url: str, db: Database, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data_dir = tmp_path / "data"
    lake = Lake(data_dir / "lake")
    ws = "ws_payback_crash"
    add_workspace(db, ws)
    generated = generate(DemoConfig(workspace_id=ws, users=400, days=DAYS, seed=11, start=START))
    demo.write_event_partitions(lake, generated.events)
    store.write_spend_raw(lake, generated.spend)
    first = refresh(data_dir, database_url, instance)
    assert first is not None and first.success and len(events(db)) == 1

    # The run publishes, then cannot reach the database (here: one without our tables): the new
    # store is live, the run fails, and no event exists.
    history = generated.events.sort("occurred_at")
    lost = late_charge(lake, history, ws, 0)
    before = serving.payback_digests(data_dir / "reports.duckdb")
    unreachable = f"sqlite:///{tmp_path / 'not_migrated.db'}"
    failed = refresh(data_dir, unreachable, instance)
    assert failed is not None and not failed.success
    published = serving.payback_digests(data_dir / "reports.duckdb")
    assert before is not None and published is not None
    assert published.by_workspace[ws][lost] != before.by_workspace[ws][lost]  # the change is live
    assert len(events(db)) == 1

    # The next run (another late charge, another cohort) announces both changes in one event.
    later = late_charge(lake, history, ws, len(history.filter(pl.col("event_type") == "renewal")) - 1)
    assert later != lost
    recovered = refresh(data_dir, database_url, instance)
    assert recovered is not None and recovered.success
    (event,) = events(db)[1:]
    assert (event["data"]["cohort_start_date"], event["data"]["cohort_end_date"]) == (
        min(lost, later).isoformat(),
        max(lost, later).isoformat(),
    )

    # Comparing the same live store again (a re-run, a second run racing this one) emits nothing.
    assert notify_payback_updates(db, serving.payback_digests(data_dir / "reports.duckdb")) == []
    assert len(events(db)) == 2

    # Forgetting what was announced (as if the first event's transaction had never committed)
    # makes the next comparison announce the whole range again, exactly once.
    with db.write() as conn:
        conn.execute(payback_notified_digests.delete())
    (update,) = notify_payback_updates(db, serving.payback_digests(data_dir / "reports.duckdb"))
    start, end = cohort_range(lake, ws)
    assert (update.change.start.isoformat(), update.change.end.isoformat()) == (start, end)
    assert notify_payback_updates(db, serving.payback_digests(data_dir / "reports.duckdb")) == []
