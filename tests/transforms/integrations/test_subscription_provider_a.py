"""RevenueCat API v2 records to canonical events: what a payback report will read from them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.providers.revenuecat_fake import ANCHOR, purchase, subscription, transaction
from transforms.events import CanonicalEvent
from transforms.integrations.subscription_provider_a import MAX_EVENT_ID, Mapper, event_id, moment, split_cents
from transforms.timefmt import iso_z

DAY = timedelta(days=1)
NOW = ANCHOR + timedelta(hours=1)
MAPPER = Mapper("ws_1", "subscription_provider_a", NOW)


def _kinds(events: list[CanonicalEvent]) -> list[tuple[str, str, float | None]]:
    return [(e.event_type, e.event_id, e.properties.get("revenue")) for e in events]


def test_trial_converted_then_renewed_books_each_paid_period_at_its_time() -> None:
    t0 = ANCHOR - 60 * DAY
    txns = [
        transaction("2000001", t0, t0 + 7 * DAY),
        transaction("2000002", t0 + 7 * DAY, t0 + 37 * DAY),
        transaction("2000003", t0 + 37 * DAY, t0 + 67 * DAY),
    ]
    sub = subscription(
        "alice", "sub_a", starts=t0, period_starts=t0 + 37 * DAY, period_ends=t0 + 67 * DAY, gross=19.98, country="DE"
    )
    events = MAPPER.subscription(sub, txns)
    assert _kinds(events) == [
        ("trial_start", "rc:2000001:trial_start", None),
        ("trial_converted", "rc:2000002:trial_converted", 9.99),
        ("renewal", "rc:2000003:renewal", 9.99),
    ]
    assert [e.occurred_at for e in events] == [t0, t0 + 7 * DAY, t0 + 37 * DAY]
    first_paid = events[1]
    assert first_paid.user_id == "alice"
    assert first_paid.platform == "ios" and first_paid.country == "DE"
    assert first_paid.properties == {
        "revenue": 9.99,
        "currency": "USD",
        "product_id": "prod_monthly",
        "store": "app_store",
        "subscription_id": "sub_a",
        # The purchase as the webhook keys it (the first store transaction), the period's end.
        "purchase_key": "2000001",
        "period_ends_at": iso_z(t0 + 37 * DAY),
    }
    assert events[0].properties["period_ends_at"] == iso_z(t0 + 7 * DAY)


def test_paid_from_the_start_is_a_subscription_start_without_a_trial() -> None:
    t0 = ANCHOR - 40 * DAY
    txns = [transaction("GPA.1", t0, t0 + 30 * DAY), transaction("GPA.1..0", t0 + 30 * DAY, t0 + 60 * DAY)]
    sub = subscription(
        "bob",
        "sub_b",
        starts=t0,
        period_starts=t0 + 30 * DAY,
        period_ends=t0 + 60 * DAY,
        gross=119.98,
        store="play_store",
    )
    events = MAPPER.subscription(sub, txns)
    assert [(e.event_type, e.properties["revenue"]) for e in events] == [
        ("subscription_start", 59.99),
        ("renewal", 59.99),
    ]
    assert {e.platform for e in events} == {"android"}


def test_a_trial_under_way_is_a_trial_start_and_nothing_paid() -> None:
    t0 = ANCHOR - 2 * DAY
    sub = subscription(
        "carol", "sub_c", starts=t0, period_starts=t0, period_ends=t0 + 7 * DAY, gross=0, status="trialing"
    )
    events = MAPPER.subscription(sub, [transaction("3000001", t0, t0 + 7 * DAY)])
    assert _kinds(events) == [("trial_start", "rc:3000001:trial_start", None)]


def test_auto_renew_turned_off_is_one_cancellation_in_the_current_period() -> None:
    t0 = ANCHOR - 10 * DAY
    sub = subscription(
        "dave",
        "sub_d",
        starts=t0,
        period_starts=t0,
        period_ends=t0 + 30 * DAY,
        gross=9.99,
        auto_renewal_status="will_not_renew",
    )
    events = MAPPER.subscription(sub, [transaction("4000001", t0, t0 + 30 * DAY)])
    assert [(e.event_type, e.event_id, e.occurred_at) for e in events] == [
        ("subscription_start", "rc:4000001:subscription_start", t0),
        ("cancellation", "rc:4000001:cancellation", t0),
    ]


def test_an_expired_trial_never_paid_is_a_trial_start_only() -> None:
    t0 = ANCHOR - 30 * DAY
    sub = subscription(
        "erin",
        "sub_e",
        starts=t0,
        period_starts=t0,
        period_ends=t0 + 7 * DAY,
        gross=0,
        status="expired",
        auto_renewal_status="will_not_renew",
    )
    events = MAPPER.subscription(sub, [transaction("5000001", t0, t0 + 7 * DAY)])
    assert [e.event_type for e in events] == ["trial_start", "cancellation"]


def test_stores_without_transactions_book_money_only_where_one_period_was_paid() -> None:
    t0 = ANCHOR - 100 * DAY
    converted = subscription(
        "fay", "sub_f", starts=t0, period_starts=t0 + 7 * DAY, period_ends=t0 + 37 * DAY, gross=9.99, store="stripe"
    )
    assert [(e.event_type, e.properties.get("revenue"), e.event_id) for e in MAPPER.subscription(converted)] == [
        ("trial_start", None, f"rc:sub_f:{int(t0.timestamp() * 1000)}:trial_start"),
        ("trial_converted", 9.99, f"rc:sub_f:{int((t0 + 7 * DAY).timestamp() * 1000)}:trial_converted"),
    ]
    # Paid from the start and renewed twice since: the current period's share is not known.
    renewed = subscription(
        "gus", "sub_g", starts=t0, period_starts=t0 + 60 * DAY, period_ends=t0 + 90 * DAY, gross=29.97, store="stripe"
    )
    events = MAPPER.subscription(renewed)
    assert [(e.event_type, e.properties.get("revenue")) for e in events] == [
        ("subscription_start", None),
        ("renewal", None),
    ]
    assert {e.platform for e in events} == {None}


def test_refunded_purchase_is_a_purchase_and_its_refund() -> None:
    at = ANCHOR - 3 * DAY
    events = MAPPER.purchase(purchase("hal", "purch_1", at=at, gross=4.99, status="refunded"))
    assert [(e.event_type, e.event_id, e.properties["revenue"], e.properties["currency"]) for e in events] == [
        ("purchase", "rc:purch_1-store:purchase", 4.99, "USD"),
        ("refund", "rc:purch_1-store:refund", 4.99, "USD"),
    ]
    owned = MAPPER.purchase(purchase("hal", "purch_2", at=at, gross=4.99))
    assert [e.event_type for e in owned] == ["purchase"]


def test_sandbox_and_future_periods_are_not_events() -> None:
    t0 = ANCHOR - 5 * DAY
    sandbox = subscription(
        "ian", "sub_i", starts=t0, period_starts=t0, period_ends=t0 + 30 * DAY, gross=9.99, environment="sandbox"
    )
    assert MAPPER.subscription(sandbox, [transaction("6000001", t0, t0 + 30 * DAY)]) == []
    # `has_already_renewed`: the next period is bought but starts after the sync.
    ahead = subscription("ian", "sub_j", starts=t0, period_starts=t0, period_ends=t0 + 30 * DAY, gross=19.98)
    txns = [transaction("7000001", t0, t0 + 30 * DAY), transaction("7000002", t0 + 30 * DAY, t0 + 60 * DAY)]
    assert [e.event_id for e in MAPPER.subscription(ahead, txns)] == ["rc:7000001:subscription_start"]


def test_ids_are_stable_and_fit_the_lake() -> None:
    long_id = "x" * 200
    assert len(event_id(long_id, "trial_converted")) <= MAX_EVENT_ID
    assert event_id(long_id, "renewal") != event_id(long_id + "y", "renewal")
    t0 = ANCHOR - 40 * DAY
    sub = subscription("kim", "sub_k", starts=t0, period_starts=t0, period_ends=t0 + 30 * DAY, gross=9.99)
    txns = [transaction("8000001", t0, t0 + 30 * DAY)]
    later = Mapper("ws_1", "subscription_provider_a", NOW + 40 * DAY)
    assert [e.event_id for e in MAPPER.subscription(sub, txns)] == [e.event_id for e in later.subscription(sub, txns)]


@pytest.mark.parametrize("raw", [None, "1", True])
def test_times_are_integer_milliseconds(raw: object) -> None:
    assert moment(raw) is None
    assert moment(1_658_399_423_658) == datetime(2022, 7, 21, 10, 30, 23, 658000, tzinfo=UTC)


def test_shares_add_up_to_revenuecats_total_to_the_cent() -> None:
    assert split_cents(39.96, 5) == [8.0, 7.99, 7.99, 7.99, 7.99]
    assert round(sum(split_cents(100.0, 3)), 2) == 100.0
    assert split_cents(0.0, 2) == [0.0, 0.0]
