"""Dropped callbacks are counted per workspace, vendor, reason and day, on the ingest hot path's
own connection (a SQLite write transaction; PostgreSQL autocommit)."""

from datetime import UTC, date, datetime, timedelta

from warehouse.db import Database
from warehouse.events.landing import single_event_connection
from warehouse.ingest.repository import DropCount, drops, drops_for_operator, record_drop
from warehouse.workspaces import create_workspace

VENDOR = "attribution_provider_a"


def test_drops_are_counted_per_reason_and_day(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    monday = datetime(2026, 11, 23, 23, 59, tzinfo=UTC)
    for at, reason in [
        (monday - timedelta(hours=1), "unknown_currency"),
        (monday, "unknown_currency"),
        (monday, "negative_charge"),
        (monday + timedelta(minutes=2), "unknown_currency"),  # the next UTC day
    ]:
        with single_event_connection(db) as conn:
            record_drop(conn, workspace_id=ws, vendor=VENDOR, reason=reason, at=at)
    with db.read() as conn:
        listed = drops(conn, workspace_id=ws)
        assert drops(conn, workspace_id=ws, since=date(2026, 11, 24)) == listed[:1]
        assert drops(conn, workspace_id="ws_other") == []
    assert listed == [
        DropCount(ws, VENDOR, "unknown_currency", date(2026, 11, 24), 1, monday + timedelta(minutes=2)),
        DropCount(ws, VENDOR, "negative_charge", date(2026, 11, 23), 1, monday),
        DropCount(ws, VENDOR, "unknown_currency", date(2026, 11, 23), 2, monday),
    ]


def test_only_the_operator_read_spans_workspaces(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    with db.write() as conn:
        other = create_workspace(conn, name="other").id
    at = datetime(2026, 11, 23, 12, tzinfo=UTC)
    for owner in (ws, other):
        with single_event_connection(db) as conn:
            record_drop(conn, workspace_id=owner, vendor=VENDOR, reason="unknown_currency", at=at)
    with db.read() as conn:
        assert [d.workspace_id for d in drops(conn, workspace_id=ws)] == [ws]
        assert sorted(d.workspace_id for d in drops_for_operator(conn)) == sorted([ws, other])
