"""The RevenueCat sync against a fake RevenueCat on 127.0.0.1 (tests/providers/revenuecat_fake.py):
real HTTP, the API v2 list and error shapes, an enforced rate limit, a real database and lake."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
import requests
import sqlalchemy as sa

from clients.subscription_provider_a import revenuecat_retry_after
from orchestration.syncs.connectors.subscription_provider_a import CONNECTOR
from tests.providers.revenuecat_fake import (
    ANCHOR,
    FakeCustomer,
    FakeRevenueCat,
    purchase,
    subscription,
    transaction,
)
from transforms.client_errors import ClientError
from transforms.integrations.kinds import ValidConfig, validate_config
from warehouse.db import Database, utcnow
from warehouse.events.landing import prune_claims
from warehouse.events.tables import landed_events
from warehouse.integrations.target import SyncTarget
from warehouse.lake import LocalLake

TYPE = "subscription_provider_a"
DAY = timedelta(days=1)
NOW = ANCHOR + timedelta(hours=2)
# Fast enough for a test, still paced; the fake enforces whatever limit a test gives it.
FAST = 10_000


def _customers(padding: int = 0) -> list[FakeCustomer]:
    """Three customers whose events are known, and `padding` customers with nothing (paging)."""
    t0 = ANCHOR - 50 * DAY
    alice = FakeCustomer(
        "alice@example.com",
        subscriptions=[
            subscription(
                "alice@example.com",
                "sub_a",
                starts=t0,
                period_starts=t0 + 37 * DAY,
                period_ends=t0 + 67 * DAY,
                gross=19.98,
                auto_renewal_status="will_not_renew",
            )
        ],
        transactions={
            "sub_a": [
                transaction("1001", t0, t0 + 7 * DAY),
                transaction("1002", t0 + 7 * DAY, t0 + 37 * DAY),
                transaction("1003", t0 + 37 * DAY, t0 + 67 * DAY),
            ]
        },
    )
    bob = FakeCustomer(
        "bob",
        subscriptions=[
            subscription(
                "bob", "sub_b", starts=t0, period_starts=t0, period_ends=t0 + 365 * DAY, gross=59.99, store="play_store"
            )
        ],
        transactions={"sub_b": [transaction("GPA.2001", t0, t0 + 365 * DAY)]},
        purchases=[purchase("bob", "pur_b", at=ANCHOR - 3 * DAY, gross=4.99, status="refunded")],
    )
    carol = FakeCustomer(
        "carol",
        subscriptions=[
            subscription(
                "carol",
                "sub_c",
                starts=ANCHOR - DAY,
                period_starts=ANCHOR - DAY,
                period_ends=ANCHOR + 6 * DAY,
                gross=0,
                status="trialing",
                store="stripe",
            )
        ],
    )
    return [alice, bob, carol, *(FakeCustomer(f"empty{i:04d}") for i in range(padding))]


EXPECTED = {
    ("alice@example.com", "trial_start", None),
    ("alice@example.com", "trial_converted", 9.99),
    ("alice@example.com", "renewal", 9.99),
    ("alice@example.com", "cancellation", None),
    ("bob", "subscription_start", 59.99),
    ("bob", "purchase", 4.99),
    ("bob", "refund", 4.99),
    ("carol", "trial_start", None),
}


def _config(fake: FakeRevenueCat, **extra: Any) -> ValidConfig:
    raw = {"api_key": fake.api_key, "project_id": fake.project_id, "base_url": fake.url, "requests_per_minute": FAST}
    return validate_config(TYPE, raw | extra)


def _target(db: Database, workspace: dict[str, Any], tmp_path: Any, **kw: Any) -> SyncTarget:
    return SyncTarget(
        db, LocalLake(tmp_path / "lake"), workspace["workspace_id"], "int_test", TYPE, **({"now": NOW} | kw)
    )


def _sync(fake: FakeRevenueCat, target: SyncTarget, **extra: Any) -> list[str]:
    lines: list[str] = []
    config = _config(fake, **extra)
    CONNECTOR.sync(CONNECTOR.client(config), target, config, lines.append)
    return lines


def _landed(db: Database) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(sa.select(landed_events).order_by(landed_events.c.seq)).mappings().all()
    return [dict(r) for r in rows]


def _facts(rows: list[dict[str, Any]]) -> set[tuple[str, str, float | None]]:
    return {(r["user_id"], r["event_type"], r["properties"].get("revenue")) for r in rows}


def test_several_pages_of_customers_land_every_event_once(
    db: Database, workspace: dict[str, Any], tmp_path: Any
) -> None:
    with FakeRevenueCat(customers=_customers(padding=205), per_minute=FAST, keep_paths=True) as fake:
        target = _target(db, workspace, tmp_path)
        lines = _sync(fake, target)
        customer_pages = [p for p in fake.stats.paths if p.split("?")[0].endswith("/customers")]
        summary = CONNECTOR.check(CONNECTOR.client(_config(fake)))
    assert summary.endswith("it has customers")
    assert len(customer_pages) == 3  # 208 customers, 100 a page
    assert any("starting_after=" in p and "limit=100" in p for p in customer_pages[1:])
    rows = _landed(db)
    assert _facts(rows) == EXPECTED and len(rows) == len(EXPECTED)
    assert {r["source"] for r in rows} == {TYPE}
    assert {r["properties"].get("currency") for r in rows if r["properties"].get("revenue")} == {"USD"}
    assert target.records == len(EXPECTED)
    assert fake.stats.rate_limited == 0
    assert "208 customers" in lines[-1]


def test_a_429_waits_backoff_ms_not_seconds(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    # Retry-After says 1 (seconds, rounded up), backoff_ms says 300: the client waits 0.3 s.
    with FakeRevenueCat(customers=_customers(), per_minute=FAST, force_429_ms=[300]) as fake:
        started = time.monotonic()
        lines = _sync(fake, _target(db, workspace, tmp_path))
        elapsed = time.monotonic() - started
    assert fake.stats.rate_limited == 1
    assert 0.3 <= elapsed < 0.9
    assert _facts(_landed(db)) == EXPECTED
    assert "1 answered 429" in lines[-1]


def test_retry_after_without_backoff_ms() -> None:
    def answer(header: str, body: bytes = b"{}") -> requests.Response:
        response = requests.Response()
        response.status_code = 429
        response.headers["Retry-After"] = header
        response._content = body
        return response

    assert revenuecat_retry_after(answer("2")) == 2.0  # the documented unit: seconds
    assert revenuecat_retry_after(answer("1500")) == 1.5  # the older docs' milliseconds
    assert revenuecat_retry_after(answer("1", b'{"backoff_ms": 250}')) == 0.25
    assert revenuecat_retry_after(answer("soon")) is None


def test_a_paced_sync_stays_under_an_enforced_limit_and_a_burst_does_not(
    db: Database, workspace: dict[str, Any], tmp_path: Any
) -> None:
    # The fake's "minute" is 1 s here: 60 requests a second. 63 customers are ~130 requests.
    customers = _customers(padding=60)
    with FakeRevenueCat(customers=customers, per_minute=60, window_s=1.0) as fake:
        _sync(fake, _target(db, workspace, tmp_path), requests_per_minute=3600)
        paced = fake.stats
    assert paced.rate_limited == 0
    with FakeRevenueCat(customers=customers, per_minute=60, window_s=1.0) as fake:
        target = _target(db, workspace, tmp_path)
        _sync(fake, target, requests_per_minute=10_000)  # ~3x the limit
        burst = fake.stats
    assert burst.rate_limited > 0  # the fake does enforce it
    assert burst.longest_429_run == 1  # each 429's backoff_ms was enough
    assert _facts(_landed(db)) == EXPECTED


def test_401_is_an_auth_failure_with_revenuecats_message(
    db: Database, workspace: dict[str, Any], tmp_path: Any
) -> None:
    with FakeRevenueCat(customers=_customers(), per_minute=FAST) as fake:
        config = validate_config(
            TYPE,
            {"api_key": "sk_wrong", "project_id": fake.project_id, "base_url": fake.url, "requests_per_minute": FAST},
        )
        with pytest.raises(ClientError) as failure:
            CONNECTOR.sync(CONNECTOR.client(config), _target(db, workspace, tmp_path), config, print)
        with pytest.raises(ClientError) as checked:
            CONNECTOR.check(CONNECTOR.client(config))
    for f in (failure.value, checked.value):
        assert f.code == "auth" and f.refused and f.status == 401
        assert "Invalid API key (authentication_error)" in f.message
    assert _landed(db) == []


def test_unknown_project_is_a_config_failure(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    with FakeRevenueCat(customers=_customers(), per_minute=FAST) as fake, pytest.raises(ClientError) as failure:
        _sync(fake, _target(db, workspace, tmp_path), project_id="projunknown")
    assert failure.value.code == "config" and failure.value.status == 404
    assert "Project not found" in failure.value.message


def test_every_call_refused_is_never_a_success(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    fake = FakeRevenueCat(customers=_customers(), per_minute=FAST, refuse_every_call=403)
    with fake, pytest.raises(ClientError) as failure:
        _sync(fake, _target(db, workspace, tmp_path))
    assert failure.value.code == "auth" and "lacks the required permissions" in failure.value.message
    assert _landed(db) == []


def test_a_5xx_then_success(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    # RevenueCat's 5xx body says backoff_ms 500: waited, then the same call succeeds.
    with FakeRevenueCat(customers=_customers(), per_minute=FAST, fail_status=503, fail_times=1) as fake:
        lines = _sync(fake, _target(db, workspace, tmp_path))
    assert _facts(_landed(db)) == EXPECTED
    assert fake.stats.requests == fake.stats.accepted and fake.stats.rate_limited == 0
    assert any("waiting 0.50 s" in line for line in lines)


def test_5xx_every_time_fails_as_the_providers_fault(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    fake = FakeRevenueCat(customers=_customers(), per_minute=FAST, fail_status=500, fail_times=99)
    with fake, pytest.raises(ClientError) as failure:
        _sync(fake, _target(db, workspace, tmp_path))
    assert failure.value.code == "provider_error" and not failure.value.refused


def test_an_empty_project_is_a_success_with_nothing(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    with FakeRevenueCat(customers=[], per_minute=FAST) as fake:
        target = _target(db, workspace, tmp_path)
        lines = _sync(fake, target)
        summary = CONNECTOR.check(CONNECTOR.client(_config(fake)))
    assert target.records == 0 and _landed(db) == []
    assert "0 customers" in lines[-1]
    assert summary.endswith("it has no customers yet")


def test_the_same_sync_twice_changes_nothing(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    with FakeRevenueCat(customers=_customers(), per_minute=FAST) as fake:
        first = _target(db, workspace, tmp_path)
        _sync(fake, first)
        before = _landed(db)
        again = _target(db, workspace, tmp_path, state=first.state)
        _sync(fake, again)
    assert again.records == 0 and again.duplicates == len(EXPECTED)
    assert _landed(db) == before


@pytest.mark.both_backends(reason="PostgreSQL coverage of warehouse/: integrations/target.py")
def test_a_sync_40_days_later_lands_no_duplicate(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    with FakeRevenueCat(customers=_customers(), per_minute=FAST) as fake:
        first = _target(db, workspace, tmp_path)
        _sync(fake, first)
        with db.write() as conn:  # the daily prune, 40 days on: every claim is gone
            prune_claims(conn, utcnow() + timedelta(days=1))
        later = _target(db, workspace, tmp_path, state=first.state, now=NOW + 40 * DAY)
        _sync(fake, later)
        assert later.records == 0 and later.skipped_settled == len(EXPECTED)
        assert len(_landed(db)) == len(EXPECTED)
        # Without the integration's state the same sync would have landed everything again.
        forgetful = _target(db, workspace, tmp_path, now=NOW + 40 * DAY)
        _sync(fake, forgetful)
    assert forgetful.records == len(EXPECTED)


def test_generated_customers_book_revenuecats_own_revenue_totals(
    db: Database, workspace: dict[str, Any], tmp_path: Any
) -> None:
    """Over a varied population (trials, conversions, renewals, cancellations, Stripe, refunds),
    the charges landed per App Store / Play Store subscription add up to the subscription's
    `total_revenue_in_usd.gross`, and every user is the RevenueCat customer id."""
    count = 80
    with FakeRevenueCat(customers=count, per_minute=FAST) as fake:
        _sync(fake, _target(db, workspace, tmp_path))
        population = [fake.customer(i) for i in fake.customer_ids()]
    rows = _landed(db)
    charges: dict[str, float] = {}
    for r in rows:
        if r["event_type"] in ("trial_converted", "subscription_start", "renewal"):
            sub = r["properties"]["subscription_id"]
            charges[sub] = charges.get(sub, 0.0) + (r["properties"].get("revenue") or 0.0)
    expected = {
        s["id"]: s["total_revenue_in_usd"]["gross"]
        for c in population
        if c is not None
        for s in c.subscriptions
        if s["store"] in ("app_store", "play_store") and s["total_revenue_in_usd"]["gross"] > 0
    }
    assert expected and {k: round(v, 2) for k, v in charges.items() if k in expected} == expected
    kinds = {r["event_type"] for r in rows}
    assert {"trial_start", "trial_converted", "subscription_start", "renewal", "cancellation"} <= kinds
    assert {r["user_id"] for r in rows} <= {c.id for c in population if c is not None}
    assert len({r["event_id"] for r in rows}) == len(rows)


def test_a_customer_deleted_during_the_sync_is_skipped(db: Database, workspace: dict[str, Any], tmp_path: Any) -> None:
    with FakeRevenueCat(customers=_customers(), per_minute=FAST, vanished=frozenset({"bob"})) as fake:
        target = _target(db, workspace, tmp_path)
        _sync(fake, target)
    assert _facts(_landed(db)) == {fact for fact in EXPECTED if fact[0] != "bob"}
