"""`report.payback_updated` from real refreshes: real Dagster runs over a real lake, the real
published DuckDB store, the outbox on SQLite and PostgreSQL.

One event per workspace whose payback rows changed, with the cohort range that changed; none
when nothing changed; and a publish whose announcement failed (database unreachable after the
swap) is announced once, by the catch-up sensor's run or by the next refresh, whichever comes first.
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

from orchestration.definitions import build_definitions
from orchestration.reports.jobs import payback_updated_job
from orchestration.reports.sensors import payback_updated_sensor
from orchestration.resources import DatabaseResource, DataDirResource
from tests.support import WEBHOOK_KEY
from tests.support.reports import START, refresh
from transforms.demo import DemoConfig, generate
from transforms.timefmt import iso_z
from warehouse.db import Database, utcnow
from warehouse.entitlements.tables import entitlement_grants, subscription_stock
from warehouse.lake import Lake, LocalLake
from warehouse.paywalls.tables import paywall_configs
from warehouse.reports import demo, report_lake, serving
from warehouse.reports.tables import payback_notified_digests
from warehouse.settings import Settings
from warehouse.tables import apps, metadata, workspaces
from warehouse.webhooks import endpoints
from warehouse.webhooks.payback_updates import notify_payback_updates
from warehouse.webhooks.tables import webhook_deliveries, webhook_events

DAYS = 30


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
    days = (
        report_lake.scan_table(lake, report_lake.PAYBACK)
        .filter(pl.col("workspace_id") == workspace_id)
        .select("cohort_date")
    )
    frame = days.select(pl.col("cohort_date").min().alias("a"), pl.col("cohort_date").max().alias("b")).collect()
    return frame["a"][0].isoformat(), frame["b"][0].isoformat()


def renewal_cohorts(history: pl.DataFrame, workspace_id: str) -> list[date]:
    """The cohort day of each renewal of `workspace_id`, in the order `late_charge` counts them."""
    mine = history.filter(pl.col("workspace_id") == workspace_id)
    installs = mine.filter(pl.col("event_type") == "install").group_by("user_id").agg(pl.col("occurred_at").min())
    renewals = mine.filter(pl.col("event_type") == "renewal").sort("occurred_at").select("user_id")
    return [t.date() for t in renewals.join(installs, on="user_id", how="left", maintain_order="left")["occurred_at"]]


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
    lake = LocalLake(data_dir / "lake")
    a, b = "ws_payback_a", "ws_payback_b"
    for ws in (a, b):
        add_workspace(db, ws)
    with db.write() as conn:  # a subscribed endpoint gets a delivery of each event
        endpoint, _ = endpoints.create_endpoint(
            conn,
            workspace_id=a,
            url="http://127.0.0.1:9/hook",
            events=["report.payback_updated"],
            allow_private=True,
            instance_key=WEBHOOK_KEY,
        )
    generated = [
        generate(DemoConfig(workspace_id=ws, users=300, days=DAYS, seed=seed, start=START))
        for seed, ws in enumerate((a, b), start=3)
    ]
    history = pl.concat([g.events for g in generated]).sort("occurred_at")
    demo.write_event_partitions(lake, history)
    report_lake.write_spend_raw(lake, pl.concat([g.spend for g in generated]))

    # The first publish: every workspace the database knows hears of its whole range, once.
    first = refresh(data_dir, database_url, instance)
    assert first is not None and first.success
    generated_at = serving.published_meta(data_dir / "reports.duckdb").generated_at
    assert generated_at is not None
    sent = events(db)
    assert sorted(e["workspace_id"] for e in sent) == [a, b]
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


def tick(data_dir: Path, database_url: str) -> dg.RunRequest | dg.SkipReason:
    resources = {
        "data_dir": DataDirResource(root=str(data_dir)),
        "database": DatabaseResource(url=database_url),
    }
    return payback_updated_sensor(dg.build_sensor_context(resources=resources))


def catch_up(data_dir: Path, database_url: str, instance: dg.DagsterInstance) -> None:
    """What the daemon does with the sensor's request: run payback_updated_job."""
    job = build_definitions(Settings(data_dir=data_dir, database_url=database_url)).resolve_job_def(
        payback_updated_job.name
    )
    assert job.execute_in_process(instance=instance).success


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: reports/serving.py")
def test_an_announcement_lost_after_the_swap_is_made_once_by_the_sensor_or_the_next_run(
    database_url: str, db: Database, tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    data_dir = tmp_path / "data"
    lake = LocalLake(data_dir / "lake")
    reports = data_dir / "reports.duckdb"
    ws = "ws_payback_crash"
    add_workspace(db, ws)
    assert isinstance(tick(data_dir, database_url), dg.SkipReason)  # nothing published yet
    generated = generate(DemoConfig(workspace_id=ws, users=400, days=DAYS, seed=11, start=START))
    demo.write_event_partitions(lake, generated.events)
    report_lake.write_spend_raw(lake, generated.spend)
    first = refresh(data_dir, database_url, instance)
    assert first is not None and first.success and len(events(db)) == 1
    assert isinstance(tick(data_dir, database_url), dg.SkipReason)  # all announced

    # A run publishes, then cannot reach the outbox (here: a database holding only what the report
    # assets read: the workspaces, and the ledger and paywalls subscription metrics read): the new
    # store is live, the run fails, and no event exists.
    history = generated.events.sort("occurred_at")
    renewals = history.filter(pl.col("event_type") == "renewal").height
    unreachable = f"sqlite:///{tmp_path / 'workspaces_only.db'}"
    engine = sa.create_engine(unreachable)
    metadata.create_all(engine, tables=[workspaces, apps, entitlement_grants, subscription_stock, paywall_configs])
    with engine.begin() as conn:
        conn.execute(
            workspaces.insert().values(id=ws, name=ws, reporting_currency="USD", timezone="UTC", created_at=utcnow())
        )
    engine.dispose()

    def lose_announcement(nth: int) -> date:
        cohort = late_charge(lake, history, ws, nth)
        before = serving.payback_digests(reports)
        failed = refresh(data_dir, unreachable, instance)
        assert failed is not None and not failed.success
        after = serving.payback_digests(reports)
        assert before is not None and after is not None
        assert after.by_workspace[ws][cohort] != before.by_workspace[ws][cohort]  # the change is live
        return cohort

    # With no further input, the schedule would start nothing that publishes (only the action
    # signals the failed run left behind): the sensor asks for a catch-up.
    lost = lose_announcement(0)
    leftover = refresh(data_dir, database_url, instance)
    assert leftover is not None and leftover.success and len(events(db)) == 1
    assert {e.asset_key.to_user_string() for e in leftover.get_asset_materialization_events()} == {"action_signals"}
    assert refresh(data_dir, database_url, instance) is None
    request = tick(data_dir, database_url)
    assert isinstance(request, dg.RunRequest) and request.run_key
    catch_up(data_dir, database_url, instance)
    (caught,) = events(db)[1:]
    assert (caught["data"]["cohort_start_date"], caught["data"]["cohort_end_date"]) == (lost.isoformat(),) * 2
    assert isinstance(tick(data_dir, database_url), dg.SkipReason)
    catch_up(data_dir, database_url, instance)  # a second run of the same catch-up announces nothing
    assert len(events(db)) == 2

    # Or the next refresh (another late charge) comes first: it announces both changes at once.
    lost = lose_announcement(renewals // 2)
    cohorts = renewal_cohorts(history, ws)
    other = next(i for i in reversed(range(renewals)) if cohorts[i] != lost)  # another cohort's renewal
    later = late_charge(lake, history, ws, other)
    assert later != lost
    recovered = refresh(data_dir, database_url, instance)
    assert recovered is not None and recovered.success
    (event,) = events(db)[2:]
    assert (event["data"]["cohort_start_date"], event["data"]["cohort_end_date"]) == (
        min(lost, later).isoformat(),
        max(lost, later).isoformat(),
    )
    assert notify_payback_updates(db, serving.payback_digests(reports)) == []  # compared again: nothing
    assert len(events(db)) == 3

    # Forgetting what was announced (as if the first event's transaction had never committed)
    # makes the next comparison announce the whole range again, exactly once.
    with db.write() as conn:
        conn.execute(payback_notified_digests.delete())
    (update,) = notify_payback_updates(db, serving.payback_digests(reports))
    start, end = cohort_range(lake, ws)
    assert (update.change.start.isoformat(), update.change.end.isoformat()) == (start, end)
    assert notify_payback_updates(db, serving.payback_digests(reports)) == []
