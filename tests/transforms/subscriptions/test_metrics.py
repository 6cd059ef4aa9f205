"""Subscription metrics' definitions (docs/metrics.md), edge by edge, through the shipped
transforms: canonical events and ledger rows in, the report's rows out."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.money import RATE_SCHEMA, REPORTING_SCHEMA, rates_frame
from transforms.subscriptions import metrics
from transforms.subscriptions.periods import CATALOG_SCHEMA, GRANT_SCHEMA

WS = "ws_1"
DAY = timedelta(days=1)


def at(day: int, hour: int = 12) -> datetime:
    """Day `day` of November 2026 (1-based), at `hour` UTC."""
    return datetime(2026, 11, day, hour, tzinfo=UTC)


class World:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.grants: list[dict[str, Any]] = []
        self.catalog: list[dict[str, Any]] = []
        self.users: list[dict[str, Any]] = []

    def event(self, kind: str, when: datetime, user: str, key: str, *, source: str = "ios_store", **props: Any) -> None:
        properties = {"purchase_key": key, **{k: v for k, v in props.items() if v is not None}}
        for name in ("period_ends_at",):
            if isinstance(properties.get(name), datetime):
                properties[name] = properties[name].isoformat().replace("+00:00", "Z")
        self.events.append(
            {
                "event_id": f"e{len(self.events)}",
                "workspace_id": WS,
                "event_type": kind,
                "occurred_at": when,
                "user_id": user,
                "properties": json.dumps(properties),
                "source": source,
                "received_at": when,
            }
        )

    def period(
        self,
        kind: str,
        start: datetime,
        length: timedelta,
        user: str,
        key: str,
        price: float | None = None,
        currency: str = "USD",
        product: str = "pro_monthly",
        **props: Any,
    ) -> None:
        money = {"revenue": price, "currency": currency} if price is not None else {}
        self.event(kind, start, user, key, period_ends_at=start + length, product_id=product, **money, **props)

    def grant(
        self,
        key: str,
        *,
        expires: datetime,
        grace: datetime | None = None,
        revoked: datetime | None = None,
        source: str = "ios_store",
        app: str = "app_1",
    ) -> None:
        self.grants.append(
            {
                "workspace_id": WS,
                "app_id": app,
                "source": source,
                "store_key": key,
                "kind": "subscription",
                "expires_at": expires,
                "grace_ends_at": grace,
                "revoked_at": revoked,
            }
        )

    def compute(self, as_of: datetime, rates: list[tuple[date, str, float]] = ()) -> tuple[pl.DataFrame, pl.DataFrame]:  # type: ignore[assignment]
        events = (
            pl.DataFrame(self.events, schema=CANONICAL_EVENT_SCHEMA)
            if self.events
            else pl.DataFrame(schema=CANONICAL_EVENT_SCHEMA)
        )
        days = [date(2026, 10, 25) + k * DAY for k in range(60)]
        rows = [(d, "USD", 1.25) for d in days] + list(rates)
        rate_rows = pl.DataFrame(
            [{"rate_date": d, "currency": c, "per_eur": r} for d, c, r in rows], schema=RATE_SCHEMA
        )
        daily, paired, _ = metrics.compute(
            events.lazy(),
            grants=pl.DataFrame(self.grants, schema=GRANT_SCHEMA),
            catalog=pl.DataFrame(self.catalog, schema=CATALOG_SCHEMA),
            users=pl.DataFrame(
                self.users,
                schema={"workspace_id": pl.String, "user_id": pl.String, "country": pl.String, "campaign": pl.String},
            ),
            rates=rates_frame(rate_rows),
            reporting=pl.DataFrame([{"workspace_id": WS, "reporting_currency": "USD"}], schema=REPORTING_SCHEMA),
            as_of=as_of,
        )
        return daily, paired

    def report(
        self, as_of: datetime, start: date, end: date, interval: str = "day", group_by: str = "none", **kw: Any
    ) -> list[dict[str, Any]]:
        daily, paired = self.compute(as_of, **kw)
        rows = metrics.report(daily, paired, start=start, end=end, interval=interval, group_by=group_by)  # type: ignore[arg-type]
        return rows.to_dicts()


def by_day(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {r["period_start"].day: r for r in rows}


def test_a_monthly_subscription_renewed_on_time_is_one_active_at_its_price_without_churn() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=10), "u1", "k1", 9.99)
    w.period("renewal", at(11), timedelta(days=10), "u1", "k1", 9.99)
    w.grant("k1", expires=at(21))
    days = by_day(w.report(at(25), date(2026, 11, 1), date(2026, 11, 25)))
    assert days[1]["active_subscriptions"] == 1 and days[1]["new_subscriptions"] == 1
    assert days[15]["active_subscriptions"] == 1 and days[15]["churned_subscriptions"] == 0
    assert days[21]["active_subscriptions"] == 0 and days[21]["churned_subscriptions"] == 1
    assert days[21]["churn_rate"] == 1.0
    assert days[24].get("active_subscriptions", 0) == 0
    total = w.report(at(25), date(2026, 11, 1), date(2026, 11, 25), interval="month")
    assert len(total) == 1
    assert total[0]["gross_revenue"] == pytest.approx(19.98) and total[0]["churned_subscriptions"] == 1


def test_a_renewal_a_day_late_is_churn_and_a_reactivation_by_day_and_neither_by_week() -> None:
    w = World()
    w.period("subscription_start", at(2), timedelta(days=7), "u1", "k1", 4.99, product="pro_weekly")
    # billing retry: the store charges a day after the period ended, and the new period runs from then
    w.period("renewal", at(10), timedelta(days=7), "u1", "k1", 4.99, product="pro_weekly")
    w.grant("k1", expires=at(17))
    days = by_day(w.report(at(13), date(2026, 11, 2), date(2026, 11, 13)))
    assert [days[d]["active_subscriptions"] for d in (8, 9, 10, 11)] == [1, 0, 1, 1]
    assert days[9]["churned_subscriptions"] == 1 and days[9]["churn_rate"] == 1.0
    assert days[10]["reactivations"] == 1 and days[10]["new_subscriptions"] == 0
    assert days[9]["group"] is None
    # 2026-11-09 is a Monday: the week of the 9th holds the lapse and the return
    weeks = {r["period_start"]: r for r in w.report(at(13), date(2026, 11, 2), date(2026, 11, 13), interval="week")}
    week = weeks[date(2026, 11, 9)]
    assert (week["churned_subscriptions"], week["reactivations"], week["active_subscriptions"]) == (0, 0, 1)
    assert weeks[date(2026, 11, 2)]["new_subscriptions"] == 1


def test_a_grace_period_keeps_the_subscription_active_and_in_mrr_until_it_ends() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=7), "u1", "k1", 4.99, product="pro_weekly")
    w.grant("k1", expires=at(8), grace=at(14))  # billing issue: access kept until the 14th
    days = by_day(w.report(at(20), date(2026, 11, 1), date(2026, 11, 20)))
    assert days[10]["active_subscriptions"] == 1 and days[10]["mrr"] == pytest.approx(4.99 * 4)
    assert days[13]["active_subscriptions"] == 1
    assert days[14]["active_subscriptions"] == 0 and days[14]["churned_subscriptions"] == 1
    assert days[14]["mrr"] == 0


def test_an_upgrade_mid_period_changes_mrr_without_churn_or_a_new_subscription() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=30), "u1", "k1", 9.99, product="pro_monthly")
    # Apple upgrade: a new transaction on the same original transaction id, at once
    w.period("renewal", at(10), timedelta(days=365), "u1", "k1", 99.99, product="pro_yearly")
    w.grant("k1", expires=at(10) + timedelta(days=365))
    rows = w.report(at(20), date(2026, 11, 1), date(2026, 11, 20))
    days = by_day(rows)
    assert days[9]["mrr"] == pytest.approx(9.99)
    assert days[10]["mrr"] == pytest.approx(round(99.99 / 12, 6))
    assert sum(r["new_subscriptions"] for r in rows) == 1
    assert sum(r["churned_subscriptions"] + r["reactivations"] for r in rows) == 0
    assert {r["active_subscriptions"] for r in rows} == {1}
    products = w.report(at(20), date(2026, 11, 20), date(2026, 11, 20), group_by="product")
    assert [(r["group"], r["active_subscriptions"]) for r in products] == [("pro_yearly", 1)]


def test_a_refund_a_month_later_is_booked_on_its_transactions_day() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=30), "u1", "k1", 9.99, transaction_id="t1")
    w.period("renewal", at(1) + timedelta(days=30), timedelta(days=30), "u1", "k1", 9.99, transaction_id="t2")
    w.event("refund", at(1) + timedelta(days=32), "u1", "k1", revenue=-9.99, currency="USD", transaction_id="t1")
    w.grant("k1", expires=at(1) + timedelta(days=60))
    first, second = w.report(at(1) + timedelta(days=40), date(2026, 11, 1), date(2026, 12, 10), interval="month")
    assert (first["refunds"], first["refund_rate"]) == (1, 1.0)
    assert first["gross_revenue"] == pytest.approx(9.99) and first["net_revenue"] == pytest.approx(0.0)
    assert (second["refunds"], second["refund_rate"], second["net_revenue"]) == (0, 0.0, pytest.approx(9.99))
    assert first["churned_subscriptions"] == 0  # the refund did not revoke access (the ledger says so)


def test_a_refund_that_revokes_access_ends_the_subscription_at_the_refund() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=30), "u1", "k1", 9.99)
    w.event("refund", at(5), "u1", "k1", revenue=-9.99, currency="USD")
    w.grant("k1", expires=at(1) + timedelta(days=30), revoked=at(5))
    days = by_day(w.report(at(10), date(2026, 11, 1), date(2026, 11, 10)))
    assert days[4]["active_subscriptions"] == 1
    assert days[5]["active_subscriptions"] == 0 and days[5]["churned_subscriptions"] == 1
    assert days[1]["refunds"] == 1 and days[1]["net_revenue"] == pytest.approx(0.0)


def test_a_trial_cancelled_before_converting_is_a_trial_and_never_churn() -> None:
    w = World()
    w.period("trial_start", at(1), timedelta(days=7), "u1", "k1")
    w.event("cancellation", at(3), "u1", "k1")
    w.grant("k1", expires=at(8))
    days = by_day(w.report(at(12), date(2026, 11, 1), date(2026, 11, 12)))
    assert days[1]["new_trials"] == 1 and days[7]["active_trials"] == 1
    assert days[8]["active_trials"] == 0
    assert all(d["churned_subscriptions"] == 0 and d["active_subscriptions"] == 0 for d in days.values())
    assert all(d["trial_conversions"] == 0 for d in days.values())


def test_a_converted_trial_is_a_new_subscription_and_a_trial_conversion() -> None:
    w = World()
    w.period("trial_start", at(1), timedelta(days=7), "u1", "k1")
    w.period("trial_converted", at(8), timedelta(days=30), "u1", "k1", 9.99)
    w.grant("k1", expires=at(8) + timedelta(days=30))
    days = by_day(w.report(at(12), date(2026, 11, 1), date(2026, 11, 12)))
    assert days[7]["active_trials"] == 1 and days[8]["active_trials"] == 0
    assert (days[8]["new_subscriptions"], days[8]["trial_conversions"], days[8]["active_subscriptions"]) == (1, 1, 1)


def test_a_weekly_and_a_yearly_plan_and_a_price_in_yen_add_up_in_one_mrr() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=7), "u1", "k1", 4.99, product="weekly", billing_period="P1W")
    w.period(
        "subscription_start", at(1), timedelta(days=365), "u2", "k2", 59.99, product="yearly", billing_period="P1Y"
    )
    w.period("subscription_start", at(1), timedelta(days=30), "u3", "k3", 1500, currency="JPY", product="monthly_jp")
    for key, days_ in (("k1", 7), ("k2", 365), ("k3", 30)):
        w.grant(key, expires=at(1) + timedelta(days=days_))
    # 1 EUR = 1.25 USD = 162.5 JPY on the day: 1500 JPY = 11.538462 USD
    yen = [(date(2026, 11, 1), "JPY", 162.5)]
    days = by_day(w.report(at(2), date(2026, 11, 1), date(2026, 11, 2), rates=yen))
    expected = round(4.99 * 4, 6) + round(59.99 / 12, 6) + round(1500 / 162.5 * 1.25, 6)
    assert days[1]["mrr"] == pytest.approx(expected, abs=1e-6)
    assert days[1]["arr"] == pytest.approx(expected * 12, abs=1e-5)
    assert days[1]["gross_revenue"] == pytest.approx(4.99 + 59.99 + 1500 / 162.5 * 1.25)


def test_a_catalogs_billing_period_wins_over_the_periods_length() -> None:
    w = World()
    # a 3-day paid period would round to a week; the catalog says the product is billed monthly
    w.period("subscription_start", at(1), timedelta(days=3), "u1", "k1", 9.99, product="promo_monthly")
    w.grant("k1", expires=at(4))
    w.catalog.append({"workspace_id": WS, "product_id": "promo_monthly", "billing_period": "P1M"})
    assert by_day(w.report(at(2), date(2026, 11, 1), date(2026, 11, 1)))[1]["mrr"] == pytest.approx(9.99)


def test_a_user_returning_with_another_purchase_is_a_reactivation_and_heals_the_lapse_in_the_month() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=5), "u1", "k1", 4.99, product="a")
    w.period("subscription_start", at(9), timedelta(days=30), "u1", "k2", 9.99, product="b")
    w.grant("k1", expires=at(6))
    w.grant("k2", expires=at(9) + timedelta(days=30))
    days = by_day(w.report(at(15), date(2026, 11, 1), date(2026, 11, 15)))
    assert days[6]["churned_subscriptions"] == 1 and days[9]["reactivations"] == 1
    assert days[9]["new_subscriptions"] == 0
    month = w.report(at(15), date(2026, 11, 1), date(2026, 11, 15), interval="month")[0]
    assert (month["new_subscriptions"], month["churned_subscriptions"], month["reactivations"]) == (1, 0, 0)
    # by product, the lapse of `a` and the return on `b` are in different groups: both count
    products = {r["group"]: r for r in w.report(at(15), date(2026, 11, 1), date(2026, 11, 15), "month", "product")}
    assert products["a"]["churned_subscriptions"] == 1 and products["b"]["reactivations"] == 1


def test_a_subscription_started_and_churned_within_the_period_is_churn_outside_the_denominator() -> None:
    w = World()
    w.period("subscription_start", at(2), timedelta(days=3), "u1", "k1", 4.99)
    w.period("subscription_start", at(1), timedelta(days=60), "u2", "k2", 4.99)
    w.grant("k1", expires=at(5))
    w.grant("k2", expires=at(1) + timedelta(days=60))
    rows = w.report(at(20), date(2026, 11, 2), date(2026, 11, 20), interval="month")
    assert rows[0]["churned_subscriptions"] == 1
    assert rows[0]["churn_rate"] == 1.0  # 1 churned / 1 active at the start (u2's)


def test_the_unfinished_day_reports_the_state_now_and_the_flows_so_far() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=10), "u1", "k1", 9.99)
    w.grant("k1", expires=at(11, 18))
    days = by_day(w.report(at(11, 15), date(2026, 11, 10), date(2026, 11, 11)))
    assert days[11]["active_subscriptions"] == 1 and days[11]["churned_subscriptions"] == 0
    days = by_day(w.report(at(11, 19), date(2026, 11, 10), date(2026, 11, 11)))
    assert days[11]["active_subscriptions"] == 0 and days[11]["churned_subscriptions"] == 1


def test_events_without_a_purchase_key_are_not_billing_facts() -> None:
    w = World()
    w.period("subscription_start", at(1), timedelta(days=30), "u1", "k1", 9.99)
    w.grant("k1", expires=at(1) + timedelta(days=30))
    w.events.append({**w.events[0], "event_id": "mmp", "user_id": "u2", "properties": '{"revenue": 9.99}'})
    day = by_day(w.report(at(2), date(2026, 11, 1), date(2026, 11, 1)))[1]
    assert (day["active_subscriptions"], day["new_subscriptions"]) == (1, 1)
    assert day["gross_revenue"] == pytest.approx(9.99)


def test_every_day_satisfies_the_actives_identity() -> None:
    w = World()
    w.period("subscription_start", at(2), timedelta(days=7), "u1", "k1", 4.99)
    w.period("renewal", at(10), timedelta(days=7), "u1", "k1", 4.99)
    w.period("subscription_start", at(1), timedelta(days=5), "u2", "k2", 4.99, product="a")
    w.period("subscription_start", at(6), timedelta(days=30), "u2", "k3", 9.99, product="b")
    for key, end in (("k1", at(17)), ("k2", at(6)), ("k3", at(6) + timedelta(days=30))):
        w.grant(key, expires=end)
    daily, _ = w.compute(at(20))
    keys = ["workspace_id", *metrics.GROUP_COLUMNS]
    frame = daily.sort([*keys, "date"]).with_columns(
        pl.col("active_subscriptions").shift(1).over(keys).fill_null(0).alias("before")
    )
    # consecutive rows only (a dropped day holds nothing and moves nothing)
    lhs = frame["active_subscriptions"]
    rhs = frame["before"] + frame["new_subscriptions"] - frame["churned_subscriptions"] + frame["reactivations"]
    assert (lhs == rhs).all()


def test_the_checks_find_a_broken_identity_and_a_negative_stock() -> None:
    from transforms.subscriptions import quality

    w = World()
    w.period("subscription_start", at(2), timedelta(days=7), "u1", "k1", 4.99)
    w.period("renewal", at(10), timedelta(days=7), "u1", "k1", 4.99)
    w.grant("k1", expires=at(17))
    daily, _ = w.compute(at(20))
    assert quality.broken_identity(daily.lazy()) == 0 and quality.negative_stocks(daily.lazy()) == 0
    tampered = daily.with_columns(
        pl.when(pl.col("date") == date(2026, 11, 12))
        .then(5)
        .otherwise(pl.col("active_subscriptions"))
        .alias("active_subscriptions")
    )
    assert quality.broken_identity(tampered.lazy()) == 2  # the 12th, and the 13th that follows it
    negative = daily.with_columns(pl.lit(-1.0).alias("mrr"))
    assert quality.negative_stocks(negative.lazy()) == daily.height
