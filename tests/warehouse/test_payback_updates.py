"""`report.payback_updated` against the outbox alone, on SQLite and PostgreSQL: the comparison of
published digests with notified ones, and two comparisons racing (a manual refresh during a
scheduled one) announcing a change once, without an error."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime, timedelta

import sqlalchemy as sa

from transforms.webhooks.payback_changes import changed_cohorts
from warehouse.db import Database
from warehouse.reports.serving import PaybackDigests
from warehouse.webhooks.payback_updates import PaybackUpdate, notify_payback_updates
from warehouse.webhooks.tables import webhook_events

DAY = date(2026, 6, 1)


def published(workspace_id: str, digests: dict[date, str]) -> PaybackDigests:
    return PaybackDigests(datetime(2026, 7, 1, 6, tzinfo=UTC), {workspace_id: digests})


def payloads(db: Database) -> list[dict]:
    with db.read() as conn:
        bodies = conn.execute(sa.select(webhook_events.c.body).order_by(webhook_events.c.created_at)).scalars()
        return [json.loads(b)["data"] for b in bodies]


def test_changed_cohorts_covers_new_changed_and_removed_days() -> None:
    d = [DAY + timedelta(days=i) for i in range(5)]
    assert changed_cohorts({d[0]: "a", d[1]: "b"}, {d[0]: "a", d[1]: "b"}) is None
    change = changed_cohorts({d[0]: "a", d[1]: "B", d[3]: "new"}, {d[0]: "a", d[1]: "b", d[4]: "gone"})
    assert change is not None and change.days == (d[1], d[3], d[4]) and (change.start, change.end) == (d[1], d[4])


def test_only_what_differs_from_the_last_notification_is_announced(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    days = {DAY + timedelta(days=i): f"h{i}" for i in range(10)}
    (first,) = notify_payback_updates(db, published(ws, days))
    assert (first.change.start, first.change.end) == (DAY, DAY + timedelta(days=9))
    assert notify_payback_updates(db, published(ws, days)) == []
    days[DAY + timedelta(days=3)] = "changed"
    days[DAY + timedelta(days=5)] = "changed"
    (second,) = notify_payback_updates(db, published(ws, days))
    assert second.change.days == (DAY + timedelta(days=3), DAY + timedelta(days=5))
    del days[DAY + timedelta(days=9)]  # a cohort day whose rows are gone is a change too
    (third,) = notify_payback_updates(db, published(ws, days))
    assert third.change.days == (DAY + timedelta(days=9),)
    assert [(p["cohort_start_date"], p["cohort_end_date"]) for p in payloads(db)] == [
        ("2026-06-01", "2026-06-10"),
        ("2026-06-04", "2026-06-06"),
        ("2026-06-10", "2026-06-10"),
    ]
    assert {p["refreshed_at"] for p in payloads(db)} == {"2026-07-01T06:00:00.000Z"}


def test_a_workspace_the_database_does_not_know_is_not_announced(db: Database, workspace: dict) -> None:
    """Lake rows of a deleted workspace: nobody to notify, and no error for the others."""
    ws = workspace["workspace_id"]
    digests = PaybackDigests(datetime(2026, 7, 1, 6, tzinfo=UTC), {ws: {DAY: "a"}, "ws_gone": {DAY: "b"}})
    assert [u.workspace_id for u in notify_payback_updates(db, digests)] == [ws]
    assert len(payloads(db)) == 1


def race(db: Database, digests: PaybackDigests) -> tuple[list[list[PaybackUpdate]], list[BaseException]]:
    """Two comparisons of the same store started together; what each announced, what each raised."""
    barrier = threading.Barrier(2)
    results: list[list[PaybackUpdate]] = []
    errors: list[BaseException] = []

    def compare() -> None:
        barrier.wait()
        try:
            results.append(notify_payback_updates(db, digests))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=compare) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, errors


def test_two_comparisons_at_once_announce_a_change_once(db: Database, workspace: dict) -> None:
    ws = workspace["workspace_id"]
    for round_ in range(12):
        results, errors = race(db, published(ws, {DAY + timedelta(days=i): f"r{round_}-{i}" for i in range(30)}))
        assert errors == []
        assert sorted(len(r) for r in results) == [0, 1], round_
    assert len(payloads(db)) == 12
