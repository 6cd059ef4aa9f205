"""Billing periods and their monthly factors: RevenueCat's table, so FloKit's MRR compares."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from fractions import Fraction

import pytest

from transforms.subscriptions.billing import (
    BillingPeriod,
    BillingPeriodError,
    nearest_standard,
    parse_billing_period,
)


@pytest.mark.parametrize(
    ("text", "factor"),
    [
        ("P1D", Fraction(30)),
        ("weekly", Fraction(4)),
        ("P2W", Fraction(2)),
        ("P4W", Fraction(1)),
        ("monthly", Fraction(1)),
        ("P2M", Fraction(1, 2)),
        ("quarterly", Fraction(1, 3)),
        ("P6M", Fraction(1, 6)),
        ("yearly", Fraction(1, 12)),
        ("P12M", Fraction(1, 12)),  # a year written in months is worth a year
        # Other periods by their length: months by 1/months, days by 30/days, a mix with 30-day months.
        ("P3D", Fraction(10)),
        ("P5W", Fraction(30, 35)),
        ("P4M", Fraction(1, 4)),
        ("P2Y", Fraction(1, 24)),
        ("P1M15D", Fraction(30, 45)),
    ],
)
def test_each_period_is_worth_revenuecats_share_of_a_month(text: str, factor: Fraction) -> None:
    assert parse_billing_period(text).monthly_factor == factor


def test_a_weekly_and_a_yearly_plan_in_one_mrr() -> None:
    weekly, yearly = parse_billing_period("weekly"), parse_billing_period("P1Y")
    mrr = Fraction("4.99") * weekly.monthly_factor + Fraction("59.99") * yearly.monthly_factor
    assert mrr == Fraction("19.96") + Fraction("59.99") / 12
    assert round(float(mrr), 2) == 24.96


@pytest.mark.parametrize("text", ["Monthly", " yearly ", "p1m", "P1Y6M"])
def test_words_and_durations_are_read_in_any_case(text: str) -> None:
    assert parse_billing_period(text).iso in {"P1M", "P1Y", "P1Y6M"}


@pytest.mark.parametrize("text", ["fortnightly", "P", "P0D", "PT1H", "P1.5M", "-P1M", "1M", ""])
def test_anything_else_is_refused_with_what_is_accepted(text: str) -> None:
    with pytest.raises(BillingPeriodError, match="billing_period must be"):
        parse_billing_period(text)


def test_a_period_of_nothing_cannot_be_built() -> None:
    with pytest.raises(BillingPeriodError):
        BillingPeriod()


START = datetime(2026, 2, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("days", "expected"),
    [
        (1, "P1D"),
        (3, "P1D"),
        (7, "P1W"),
        (10, "P1W"),  # nearer a week than two
        (11, "P2W"),
        (14, "P2W"),
        (28, "P4W"),  # February: a month's worth either way
        (29, "P4W"),
        (30, "P1M"),
        (31, "P1M"),
        (59, "P2M"),
        (92, "P3M"),
        (181, "P6M"),
        (365, "P1Y"),
        (366, "P1Y"),
    ],
)
def test_a_paid_period_without_a_named_period_rounds_to_the_nearest_standard(days: int, expected: str) -> None:
    period = nearest_standard(START, START + timedelta(days=days))
    assert period.iso == expected
    assert period.monthly_factor == parse_billing_period(expected).monthly_factor


def test_a_renewal_a_day_late_still_reads_as_its_month() -> None:
    """A billing retry that renews a day late: the paid period runs from the late renewal."""
    assert nearest_standard(START + timedelta(days=1), START + timedelta(days=1, hours=24 * 28)).iso == "P4W"
    assert nearest_standard(START, START + timedelta(days=32)).iso == "P1M"


def test_a_period_that_does_not_end_after_it_starts_is_refused() -> None:
    with pytest.raises(ValueError, match="must end after it starts"):
        nearest_standard(START, START)
