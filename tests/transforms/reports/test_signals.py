"""The action signals on literal frames: every statistic recomputed by hand, a late refund, money
through the cube's path, and the rows agreeing with the payback cube they sit beside."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl
import pytest

from tests.support.money import RATES, reporting
from tests.support.report_rows import D0, T0, events, spend_rows
from transforms.reports import lifecycle, payback, signals
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA

REPORTING = reporting("ws_a")


def _usd_per_eur(day: date) -> float:
    usd = RATES.filter((pl.col("currency") == "USD") & (pl.col("rate_date") <= day)).sort("rate_date")
    return float(usd["per_eur"][-1])


def _history(extra: tuple[tuple[str, str, datetime, dict[str, object]], ...] = ()) -> pl.LazyFrame:
    """Three users installed on D0 by meta/c1 in the US: u1 and u2 met paywall pw1 and tapped
    offer p1 on the install day, u3 met nothing. u1 trials, converts on day 3 ($10), renews on
    day 10 ($10) and day 30 ($10, outside every horizon); u2 subscribes on day 1 (€5) and is
    refunded on day 20 (€5); u3 never pays. u4, installed the day before, is another cohort."""
    meta = {"campaign": "meta", "creative": "c1"}
    return events(
        ("install", "u1", T0, meta),
        ("install", "u2", T0, meta),
        ("install", "u3", T0, meta),
        ("install", "u4", T0 - timedelta(days=1), meta),
        ("paywall_impression", "u1", T0 + timedelta(minutes=1), {"paywall_id": "pw1"}),
        ("paywall_offer_tap", "u1", T0 + timedelta(minutes=2), {"product_id": "p1"}),
        ("paywall_impression", "u2", T0 + timedelta(minutes=1), {"paywall_id": "pw1"}),
        ("paywall_offer_tap", "u2", T0 + timedelta(minutes=2), {"product_id": "p1"}),
        ("trial_start", "u1", T0 + timedelta(minutes=3), {"product_id": "p1"}),
        ("trial_converted", "u1", T0 + timedelta(days=3), {"revenue": 10, "currency": "USD"}),
        ("renewal", "u1", T0 + timedelta(days=10), {"revenue": 10, "currency": "USD"}),
        ("renewal", "u1", T0 + timedelta(days=30), {"revenue": 10, "currency": "USD"}),
        ("subscription_start", "u2", T0 + timedelta(days=1), {"revenue": 5, "currency": "EUR"}),
        ("refund", "u2", T0 + timedelta(days=20), {"revenue": 5, "currency": "EUR"}),
        ("renewal", "u4", T0, {"revenue": 99, "currency": "USD"}),
        *extra,
    )


def _signals(history: pl.LazyFrame, observed_through: date, cohort: date = D0) -> pl.DataFrame:
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(history).lazy()).lazy()
    subscription = lifecycle.subscription_events(history, RATES, REPORTING)
    spend = lifecycle.clean_spend(
        spend_rows((D0, "meta", "c1", "US", 30.0), (D0, "google", "g1", "US", 7.0)), RATES, REPORTING
    )
    frame = signals.action_signals(
        cohorts.filter(pl.col("cohort_date") == cohort),
        subscription,
        spend.filter(pl.col("spend_date") == cohort),
        observed_through,
    ).collect()
    assert frame.schema == ACTION_SIGNAL_SCHEMA
    return frame.sort("campaign", "paywall")


def _cell(frame: pl.DataFrame, **labels: str) -> dict[str, object]:
    rows = frame.filter(*[pl.col(k) == v for k, v in labels.items()]).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_every_statistic_by_hand() -> None:
    frame = _signals(_history(), observed_through=D0 + timedelta(days=40))
    eur = 5 * _usd_per_eur(D0 + timedelta(days=1))  # u2's charge, at the rate of its day
    eur_back = 5 * _usd_per_eur(D0 + timedelta(days=20))  # the refund, at the rate of its day
    paid = _cell(frame, campaign="meta", paywall="pw1", offer="p1")
    # x(u1) = 10 by day 7, 20 by day 14 and 30; x(u2) = eur by day 7 and 14, eur - eur_back by day 30.
    x7, x14, x30 = (10.0, eur), (20.0, eur), (20.0, eur - eur_back)
    assert {k: paid[k] for k in ("installs", "paywall_users", "trials", "trial_conversions")} == {
        "installs": 2,
        "paywall_users": 2,
        "trials": 1,
        "trial_conversions": 1,
    }
    assert (paid["subscriptions"], paid["refunds_n"], paid["complete_days"]) == (2, 1, 30)
    assert paid["spend"] == pytest.approx(20.0)  # 30 shared 2:1 by installs
    for horizon, xs in ((7, x7), (14, x14), (30, x30)):
        assert paid[f"net_rev_d{horizon}"] == pytest.approx(sum(xs))
        assert paid[f"net_rev_sq_d{horizon}"] == pytest.approx(sum(x * x for x in xs))
    # u3: a zero counted in installs only.
    silent = _cell(frame, campaign="meta", paywall="(none)")
    assert (silent["installs"], silent["paywall_users"], silent["spend"]) == (1, 0, pytest.approx(10.0))
    assert all(silent[c] == 0 for c in ACTION_SIGNAL_SCHEMA if c.startswith(("net_rev", "trial", "refunds")))
    # Spend of a cell that brought nobody: its own row, offer and paywall "(none)", no installs.
    idle = _cell(frame, campaign="google")
    assert (idle["installs"], idle["spend"], idle["offer"], idle["paywall"]) == (0, 7.0, "(none)", "(none)")
    assert frame.height == 3  # u4's cohort is not this day's


def test_a_late_refund_after_day_7_changes_d30_but_not_d7_or_d14() -> None:
    observed = D0 + timedelta(days=40)
    before = _cell(_signals(_history(), observed), paywall="pw1")
    late = ("refund", "u1", T0 + timedelta(days=20), {"revenue": 4, "currency": "USD"})
    after = _cell(_signals(_history((late,)), observed), paywall="pw1")
    for horizon in (7, 14):
        assert after[f"net_rev_d{horizon}"] == before[f"net_rev_d{horizon}"]
        assert after[f"net_rev_sq_d{horizon}"] == before[f"net_rev_sq_d{horizon}"]
    assert after["net_rev_d30"] == pytest.approx(before["net_rev_d30"] - 4)  # type: ignore[operator]
    # u1's x30 goes from 20 to 16: Σx² drops by 20² - 16².
    assert after["net_rev_sq_d30"] == pytest.approx(before["net_rev_sq_d30"] - (400 - 256))  # type: ignore[operator]
    assert (before["refunds_n"], after["refunds_n"]) == (1, 2)


def test_complete_days_say_which_horizons_a_young_cohort_has_reached() -> None:
    young = _cell(_signals(_history(), observed_through=D0 + timedelta(days=10)), paywall="pw1")
    assert young["complete_days"] == 10  # days 0..9 are over; day 10 is the lake's last, still filling
    assert [h for h in (7, 14, 30) if young["complete_days"] >= h] == [7]  # type: ignore[operator]
    assert _cell(_signals(_history(), observed_through=D0), paywall="pw1")["complete_days"] == 0


def test_signals_sum_to_the_cube_per_campaign_in_the_reporting_currency() -> None:
    """Spend, installs, trials and 30-day net revenue per campaign, as the cube serves them; in
    EUR reporting too, so both convert the same amounts at the same rates."""
    history = _history()
    for currency in ("USD", "EUR"):
        money = reporting("ws_a", currency=currency)
        cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(history).lazy()).lazy()
        subscription = lifecycle.subscription_events(history, RATES, money)
        spend = lifecycle.clean_spend(spend_rows((D0, "meta", "c1", "US", 30.0)), RATES, money)
        cube = (
            payback.payback_cube(cohorts, subscription, spend)
            .filter((pl.col("dimension") == "campaign") & (pl.col("day") < 30))
            .group_by("cohort_date", pl.col("value").alias("campaign"))
            .agg(
                pl.col("installs", "spend", "trials", "trial_conversions", "subscriptions").sum(),
                (pl.col("revenue") - pl.col("refunds")).sum().alias("net_rev_d30"),
            )
        )
        rows = signals.action_signals(cohorts, subscription, spend, D0 + timedelta(days=40))
        mine = rows.group_by("cohort_date", "campaign").agg(
            pl.col("installs", "spend", "trials", "trial_conversions", "subscriptions", "net_rev_d30").sum()
        )
        joined = cube.join(mine, on=["cohort_date", "campaign"], how="full", coalesce=True).collect()
        assert joined.height == 2  # D0's cohort and u4's
        for column in ("installs", "spend", "trials", "trial_conversions", "subscriptions", "net_rev_d30"):
            assert joined[column].to_list() == pytest.approx(joined[f"{column}_right"].to_list()), (currency, column)


def test_an_amount_that_cannot_be_converted_leaves_its_sums_unknown_not_short() -> None:
    """The cube's asset checks stop the publish on such an amount; the signals, read by the
    engine, say they do not know rather than serve a sum without it."""
    late = ("renewal", "u1", T0 + timedelta(days=20), {"revenue": 3, "currency": "XXX"})
    frame = _signals(_history((late,)), observed_through=D0 + timedelta(days=40))
    paid = _cell(frame, paywall="pw1")
    assert paid["net_rev_d30"] is None and paid["net_rev_sq_d30"] is None  # day 20: the 30-day sums
    assert paid["net_rev_d14"] == pytest.approx(20.0 + 5 * _usd_per_eur(D0 + timedelta(days=1)))  # before it: known
    silent = _cell(frame, campaign="meta", paywall="(none)")
    assert (silent["net_rev_d30"], silent["spend"]) == (0.0, pytest.approx(10.0))
