"""The life-table estimate of a cohort curve across cohorts of different ages."""

import pytest

from transforms.reports.curves import MIN_WEEK_USERS, WeekSums, chain_ladder


def test_each_week_is_estimated_over_its_own_users_and_revenue_accumulates() -> None:
    # 100 users have seen weeks 0-1, only the 30 oldest have seen week 2.
    points = chain_ladder(
        [WeekSums(0, 100, 100, 200.0), WeekSums(1, 100, 40, 100.0), WeekSums(2, 30, 9, 6.0)], min_users=20
    )
    assert [(p.week, p.users) for p in points] == [(0, 100), (1, 100), (2, 30)]
    assert [p.retained_pct for p in points] == [1.0, 0.4, 0.3]
    # 2.00 + 1.00 + 0.20 per user; averaging cumulative revenue over whichever cohorts had a week
    # would give week 2 only the 30 users' own total, whatever the other 70 earned before.
    assert [p.cumulative_revenue for p in points] == pytest.approx([2.0, 3.0, 3.2])


def test_weeks_from_too_few_users_are_left_out_with_every_later_week() -> None:
    weeks = [WeekSums(0, 50, 50, 10.0), WeekSums(1, 25, 10, 5.0), WeekSums(2, 19, 5, 5.0), WeekSums(3, 19, 4, 1.0)]
    assert [p.week for p in chain_ladder(weeks, min_users=20)] == [0, 1]
    assert chain_ladder([WeekSums(0, MIN_WEEK_USERS - 1, MIN_WEEK_USERS - 1, 5.0)]) == []


def test_a_week_whose_refunds_exceed_its_charges_lowers_the_cumulative_revenue() -> None:
    points = chain_ladder([WeekSums(0, 40, 40, 80.0), WeekSums(1, 40, 20, -20.0)], min_users=20)
    assert [p.cumulative_revenue for p in points] == pytest.approx([2.0, 1.5])


def test_the_curve_stops_at_a_missing_week_and_reads_weeks_in_order() -> None:
    weeks = [WeekSums(2, 30, 9, 3.0), WeekSums(0, 30, 30, 3.0), WeekSums(1, 30, 12, 3.0), WeekSums(4, 30, 3, 3.0)]
    assert [p.week for p in chain_ladder(weeks, min_users=20)] == [0, 1, 2]
