"""The customer page's decisions (transforms/customers.py): a grant's end, a purchase's status,
what a search hit is, the timeline's page."""

from datetime import UTC, datetime, timedelta

import pytest

from transforms import customers as c

NOW = datetime(2026, 1, 31, 12, tzinfo=UTC)


def state(**overrides: object) -> c.GrantState:
    values: dict[str, object] = {
        "source": "ios_store", "kind": "subscription", "expires_at": NOW + timedelta(days=3), "grace_ends_at": None,
        "access_ends_at": NOW + timedelta(days=3), "revoked_at": None, "in_trial": False, "auto_renew": True,
    }  # fmt: skip
    return c.GrantState(**(values | overrides))  # type: ignore[arg-type]


def test_durations_are_calendar_months_and_years_and_exact_weeks_and_days() -> None:
    assert c.add_duration(NOW, "P1M") == datetime(2026, 2, 28, 12, tzinfo=UTC)  # end of February
    assert c.add_duration(NOW, "P1Y") == datetime(2027, 1, 31, 12, tzinfo=UTC)
    assert c.add_duration(NOW, "P7D") == NOW + timedelta(days=7)
    assert c.add_duration(NOW, "P1Y1M2W") == datetime(2027, 2, 28, 12, tzinfo=UTC) + timedelta(weeks=2)
    for bad in ("P", "1M", "PT1H", "P1.5M", "monthly", "P0D"):
        with pytest.raises(c.CustomerInputError):
            c.add_duration(NOW, bad)


def test_a_grant_ends_by_exactly_one_of_expiry_and_duration_in_the_future() -> None:
    assert c.promotion_end(NOW, expires_at=None, duration="P7D") == NOW + timedelta(days=7)
    assert c.promotion_end(NOW, expires_at=NOW + timedelta(hours=1), duration=None) == NOW + timedelta(hours=1)
    for expires, duration in ((None, None), (NOW + timedelta(days=1), "P1D"), (NOW, None), (None, "P11Y")):
        with pytest.raises(c.CustomerInputError):
            c.promotion_end(NOW, expires_at=expires, duration=duration)


def test_purchase_status_first_match_wins() -> None:
    assert c.purchase_status(state(), NOW) == "active"
    assert c.purchase_status(state(auto_renew=False), NOW) == "cancelled"
    assert c.purchase_status(state(in_trial=True), NOW) == "in_trial"
    grace = state(expires_at=NOW - timedelta(hours=1), grace_ends_at=NOW + timedelta(days=2))
    assert c.purchase_status(grace, NOW) == "in_grace"
    assert c.purchase_status(state(access_ends_at=NOW - timedelta(seconds=1)), NOW) == "expired"
    assert c.purchase_status(state(revoked_at=NOW - timedelta(days=1)), NOW) == "refunded"
    assert c.purchase_status(state(source="promotional", revoked_at=NOW), NOW) == "expired"  # ended early
    assert c.purchase_status(state(source="promotional", auto_renew=False), NOW) == "active"
    assert c.purchase_status(state(kind="lifetime", expires_at=None, access_ends_at=None), NOW) == "active"
    assert c.purchase_status(state(kind="consumable"), NOW) == "expired"


def test_what_a_search_hit_matched_on() -> None:
    assert c.matched_on("user_id", "ios_store") == "user_id"
    assert c.matched_on("store_key", "payment_processor") == "stripe_subscription_id"
    assert c.matched_on("customer_id", "payment_processor") == "stripe_customer_id"
    assert c.matched_on("customer_id", "subscription_provider_b") == "provider_customer_id"
    for column in ("store_key", "current_token", "transaction_id"):
        assert c.matched_on(column, "android_store") == "purchase_id"


def test_the_timeline_is_newest_first_strictly_before_and_limited() -> None:
    entries = [c.Entry(NOW - timedelta(minutes=m), "event", "e", "s", f"evt_{m}") for m in range(5)]
    page = c.timeline_page(entries, before=None, limit=2)
    assert [e.ref for e in page] == ["evt_0", "evt_1"]
    assert [e.ref for e in c.timeline_page(entries, before=page[-1].occurred_at, limit=10)] == [
        "evt_2", "evt_3", "evt_4",
    ]  # fmt: skip


def test_money_converts_through_the_euro() -> None:
    assert c.to_reporting(10.0, 2.0, 1.5) == 7.5
    assert c.to_reporting(10.0, None, 1.5) is None
