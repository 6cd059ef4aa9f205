"""What the dashboard's Subscriptions page draws: the report's rows (`SubscriptionsRow`, v1's) as
one series per group over the periods of the range. Pure: rows in, series out.

The page's tables and CSV carry every row; only the charts are capped, at `MAX_SERIES` lines,
because more lines than the palette has colours cannot be told apart (and the Cohorts chart,
which draws every group, rarely has more than eight).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from transforms.subscriptions.answers import SubscriptionsRow

# The charts' palette (static/reports.js, Okabe-Ito) has eight colours that stay distinct for
# colour-blind readers: a ninth line would repeat a colour.
MAX_SERIES = 8


def trial_conversion(row: SubscriptionsRow) -> float | None:
    """The period's trial conversions over the trials started in it; None where no trial started.

    Both counts are the period's own flows, so this is not the conversion of a cohort of trials:
    a trial started late in one period converts in the next (the figure can exceed 1 in
    principle). It is what the page's chart and definition say, and it needs nothing beyond v1's
    row."""
    return row.trial_conversions / row.new_trials if row.new_trials else None


@dataclass(frozen=True)
class Series:
    """One group's figures, one value per period of the chart (`SubscriptionsChart.periods`)."""

    group: str | None
    mrr: list[float]
    active_subscriptions: list[int]
    active_trials: list[int]
    churn_rate: list[float | None]
    trial_conversion: list[float | None]
    refund_rate: list[float | None]


@dataclass(frozen=True)
class SubscriptionsChart:
    """The periods (their first days, in order), the series drawn, and how many groups the
    report has (more than drawn when the cap applied)."""

    periods: list[date]
    series: list[Series]
    groups: int

    @property
    def capped(self) -> bool:
        return len(self.series) < self.groups


def _rank(rows: Sequence[SubscriptionsRow]) -> tuple[float, int]:
    """A group's weight: its MRR in the last period, then its active subscriptions there."""
    last = rows[-1]
    return (last.mrr, last.active_subscriptions)


def subscriptions_chart(rows: Sequence[SubscriptionsRow], *, limit: int = MAX_SERIES) -> SubscriptionsChart:
    """The report's rows as series: every period of the rows, and the `limit` groups with the
    highest MRR in the last period (then active subscriptions, then the group's name), heaviest
    first. The report has a row for every period and group of the range (v1 fills the gaps with
    zeros), so each series has a value for every period."""
    periods = sorted({r.period_start for r in rows})
    by_group: dict[str | None, list[SubscriptionsRow]] = {}
    for row in sorted(rows, key=lambda r: r.period_start):
        by_group.setdefault(row.group, []).append(row)
    ranked = sorted(
        by_group.items(),
        key=lambda item: (*(-v for v in _rank(item[1])), item[0] is None, item[0] or ""),
    )
    series = [
        Series(
            group=group,
            mrr=[r.mrr for r in group_rows],
            active_subscriptions=[r.active_subscriptions for r in group_rows],
            active_trials=[r.active_trials for r in group_rows],
            churn_rate=[r.churn_rate for r in group_rows],
            trial_conversion=[trial_conversion(r) for r in group_rows],
            refund_rate=[r.refund_rate for r in group_rows],
        )
        for group, group_rows in ranked[:limit]
    ]
    return SubscriptionsChart(periods=periods, series=series, groups=len(by_group))
