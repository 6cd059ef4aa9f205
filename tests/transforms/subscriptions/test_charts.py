"""The Subscriptions page's series: one per group, the heaviest first, capped at the palette."""

from __future__ import annotations

from datetime import date
from typing import Any

from transforms.subscriptions.answers import SubscriptionsRow
from transforms.subscriptions.charts import MAX_SERIES, subscriptions_chart, trial_conversion

JUNE, JULY = date(2026, 6, 1), date(2026, 7, 1)


def row(period: date, group: str | None, **figures: Any) -> SubscriptionsRow:
    values: dict[str, Any] = {
        "active_subscriptions": 0,
        "active_trials": 0,
        "mrr": 0.0,
        "arr": 0.0,
        "new_subscriptions": 0,
        "new_trials": 0,
        "trial_conversions": 0,
        "reactivations": 0,
        "churned_subscriptions": 0,
        "churn_rate": None,
        "refunds": 0,
        "refund_rate": None,
        "gross_revenue": 0.0,
        "net_revenue": 0.0,
    }
    return SubscriptionsRow(period_start=period, group=group, **{**values, **figures})


def test_trial_conversion_is_the_periods_conversions_over_its_trials_and_none_without_trials() -> None:
    assert trial_conversion(row(JUNE, None, new_trials=8, trial_conversions=2)) == 0.25
    assert trial_conversion(row(JUNE, None, new_trials=0, trial_conversions=3)) is None
    # Both are the period's own flows: last period's trials converting now can exceed this period's.
    assert trial_conversion(row(JUNE, None, new_trials=2, trial_conversions=3)) == 1.5


def test_one_series_per_group_in_period_order_heaviest_mrr_in_the_last_period_first() -> None:
    rows = [
        row(JULY, "weekly", mrr=10.0, active_subscriptions=5),
        row(JUNE, "weekly", mrr=50.0, active_subscriptions=9, churn_rate=0.1),
        row(JUNE, "yearly", mrr=20.0, active_subscriptions=2, new_trials=4, trial_conversions=1),
        row(JULY, "yearly", mrr=30.0, active_subscriptions=3, refund_rate=0.5),
        row(JUNE, None, mrr=0.0, active_subscriptions=1),
        row(JULY, None, mrr=10.0, active_subscriptions=6),
    ]
    chart = subscriptions_chart(rows)
    assert chart.periods == [JUNE, JULY] and chart.groups == 3 and not chart.capped
    # yearly (30 in July) first; weekly and the unknown group tie on MRR: more actives first.
    assert [s.group for s in chart.series] == ["yearly", None, "weekly"]
    yearly, unknown, weekly = chart.series
    assert yearly.mrr == [20.0, 30.0] and yearly.active_subscriptions == [2, 3]
    assert yearly.trial_conversion == [0.25, None] and yearly.refund_rate == [None, 0.5]
    assert weekly.mrr == [50.0, 10.0] and weekly.churn_rate == [0.1, None]
    assert unknown.active_subscriptions == [1, 6]


def test_the_chart_draws_at_most_max_series_groups_and_says_how_many_there_are() -> None:
    rows = [row(JUNE, f"p{i:02}", mrr=float(i), active_subscriptions=i) for i in range(12)]
    chart = subscriptions_chart(rows)
    assert MAX_SERIES == 8 and chart.groups == 12 and chart.capped
    assert [s.group for s in chart.series] == [f"p{i:02}" for i in range(11, 3, -1)]
    assert [s.group for s in subscriptions_chart(rows, limit=2).series] == ["p11", "p10"]
    # Equal weight: by name, and the unknown group after the named ones.
    ties = subscriptions_chart([row(JUNE, None), row(JUNE, "b"), row(JUNE, "a")])
    assert [s.group for s in ties.series] == ["a", "b", None]


def test_no_rows_no_periods_no_series() -> None:
    chart = subscriptions_chart([])
    assert chart.periods == [] and chart.series == [] and chart.groups == 0 and not chart.capped
