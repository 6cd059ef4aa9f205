"""Landing: claims and rows in one transaction, exactly-once under concurrency, on both databases."""

import threading
from datetime import UTC, date, datetime, timedelta

import polars as pl
import pytest
import sqlalchemy as sa

from transforms.events import CANONICAL_EVENT_SCHEMA, CanonicalEvent, derived_event_id
from warehouse.db import Database
from warehouse.events import landing
from warehouse.events.tables import event_claims, landed_events

T0 = datetime(2026, 11, 20, 23, 59, 30, tzinfo=UTC)


def event(event_id: str, *, occurred_at: datetime = T0, workspace_id: str = "ws_a") -> CanonicalEvent:
    return CanonicalEvent(
        event_id=event_id,
        workspace_id=workspace_id,
        event_type="install",
        occurred_at=occurred_at,
        source="test",
        received_at=T0,
        platform="ios",
        country="DE",
        user_id="u1",
        properties={"revenue": 1.5, "currency": "EUR"},
    )


def count(db: Database, table: sa.Table) -> int:
    with db.read() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def test_new_events_land_and_redeliveries_are_duplicates(db: Database) -> None:
    with db.write() as conn:
        first = landing.land(conn, [event("e1"), event("e2"), event("e1")])
    assert first.written == ("e1", "e2") and first.duplicate == ("e1",)
    with db.write() as conn:
        again = landing.land(conn, [event("e2"), event("e3")])
    assert again.written == ("e3",) and again.duplicate == ("e2",)
    assert count(db, landed_events) == 3


def test_same_event_id_in_two_workspaces_is_two_events(db: Database) -> None:
    with db.write() as conn:
        result = landing.land(conn, [event("e1", workspace_id="ws_a"), event("e1", workspace_id="ws_b")])
    assert len(result.written) == 2


def test_a_failed_transaction_releases_the_claim(db: Database) -> None:
    def land_then_fail() -> None:
        with db.write() as conn:
            assert landing.land(conn, [event("e1")]).written == ("e1",)
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        land_then_fail()
    assert count(db, event_claims) == 0 and count(db, landed_events) == 0
    with db.write() as conn:
        assert landing.land(conn, [event("e1")]).written == ("e1",)


def test_eight_concurrent_identical_deliveries_land_once(db: Database) -> None:
    barrier = threading.Barrier(8)
    results: list[landing.LandingResult] = []

    def deliver() -> None:
        barrier.wait()
        with db.write() as conn:
            results.append(landing.land(conn, [event("same")]))

    threads = [threading.Thread(target=deliver) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(len(r.written) for r in results) == [0] * 7 + [1]
    assert count(db, landed_events) == 1


def test_pending_days_day_frame_and_mark_in_lake(db: Database) -> None:
    with db.write() as conn:
        landing.land(conn, [event("e1"), event("e2", occurred_at=T0 + timedelta(minutes=1))])
    with db.read() as conn:
        pending = landing.pending_days(conn)
        frame, seqs = landing.day_frame(conn, date(2026, 11, 20))
    assert set(pending) == {date(2026, 11, 20), date(2026, 11, 21)}
    assert frame.schema == pl.Schema(CANONICAL_EVENT_SCHEMA)
    assert frame["event_id"].to_list() == ["e1"]
    assert frame["properties"].to_list() == ['{"currency":"EUR","revenue":1.5}']
    assert frame["occurred_at"].to_list() == [T0]
    with db.write() as conn:
        assert landing.mark_in_lake(conn, seqs) == 1
    with db.read() as conn:
        assert set(landing.pending_days(conn)) == {date(2026, 11, 21)}
        assert landing.day_frame(conn, date(2026, 11, 20))[1] == []


def test_prune_claims_drops_only_old_ones(db: Database) -> None:
    with db.write() as conn:
        landing.land(conn, [event("e1")])
    with db.write() as conn:
        assert landing.prune_claims(conn, datetime.now(UTC) - timedelta(days=30)) == 0
        assert landing.prune_claims(conn, datetime.now(UTC) + timedelta(seconds=1)) == 1


def test_prune_claims_keeps_the_window_exact_over_many_claims(db: Database) -> None:
    """Claims of 40 days, 25 a day, in insertion order; then three claims whose clock went
    backwards. Pruning at 30 days drops exactly the claims older than the cutoff that precede
    the first young one (SQLite walks the rowid), and never a claim younger than the cutoff."""
    now = datetime.now(UTC)
    claims = [
        (f"e{day:02d}-{i:02d}", now - timedelta(days=40 - day) + timedelta(minutes=i))
        for day in range(40)
        for i in range(25)
    ]
    skewed = [
        ("late-old", now - timedelta(days=35)),
        ("young", now - timedelta(days=1)),
        ("old-again", now - timedelta(days=31)),
    ]
    with db.write() as conn:
        for event_id, at in [*claims, *skewed]:
            conn.execute(event_claims.insert().values(workspace_id="ws_a", event_id=event_id, claimed_at=at))
    cutoff = now - timedelta(days=30)
    with db.write() as conn:
        pruned = landing.prune_claims(conn, cutoff)
    with db.read() as conn:
        left = dict(conn.execute(sa.select(event_claims.c.event_id, event_claims.c.claimed_at)).all())
    assert all(at >= cutoff for event_id, at in left.items() if not event_id.startswith(("late", "old")))
    assert {event_id for event_id, at in claims if at >= cutoff} | {"young"} <= set(left)
    assert pruned == len(claims) + len(skewed) - len(left)
    # The two out-of-order old claims after the young ones survive on SQLite (a later prune, once
    # the claims before them are gone, takes them); PostgreSQL's index finds them at once.
    assert {"late-old", "old-again"} & set(left) == (set() if not db.is_sqlite else {"late-old", "old-again"})


def test_derived_ids_are_stable_and_field_sensitive() -> None:
    base = {"source": "v", "app": "a", "user": "u", "event_type": "install", "occurred_at": T0, "raw_event_id": None}
    assert derived_event_id(**base) == derived_event_id(**base)
    assert derived_event_id(**base).startswith("evt_")
    for field, other in [
        ("source", "w"),
        ("app", "b"),
        ("user", None),
        ("event_type", "trial_start"),
        ("occurred_at", T0 + timedelta(seconds=1)),
        ("raw_event_id", "r1"),
    ]:
        assert derived_event_id(**{**base, field: other}) != derived_event_id(**base), field
