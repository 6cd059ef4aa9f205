"""The reports' questions and answers: the query models and answer shapes of Payback and Cohorts.

One declaration for the two surfaces that show them: v1 validates its query string with these
models and answers these shapes (they are its OpenAPI schema), and the dashboard's report pages
validate their filters with the same models and draw the same rows, so a page, its CSV and
`GET /v1/reports/...` with the same query answer the same numbers. Pure: no I/O.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from transforms.reports.curves import MIN_WEEK_USERS
from transforms.reports.schemas import MAX_WINDOW_DAYS

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _day(text: object) -> date:
    """Spec: dates are YYYY-MM-DD, nothing laxer (no timestamps, no other separators)."""
    if not isinstance(text, str) or not _DAY.match(text):
        raise ValueError("must be a date as YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError("must be a real calendar date as YYYY-MM-DD") from exc


Day = Annotated[date, BeforeValidator(_day)]
GroupBy = Literal["campaign", "creative", "country", "offer", "paywall"]


class PaybackQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    start_date: Day
    end_date: Day
    group_by: GroupBy = "campaign"
    cohort_window_days: int = Field(30, ge=1, le=MAX_WINDOW_DAYS)  # spec: default 30; limits 1..365


class CohortsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    cohort_start: Day
    cohort_end: Day
    group_by: GroupBy = "campaign"


class PaybackRow(BaseModel):
    cohort: str = Field(description="Group label (campaign, creative, country, offer or paywall).")
    spend: float
    cac: float | None = Field(description="Spend per install (0 for organic); null for spend without installs.")
    trials: int
    trial_conversion_rate: float = Field(description="Fraction.")
    subscriptions: int
    roas_30d: float | None = Field(
        description="Net revenue of days 0-29 over spend, whatever the window; null when the group has no spend "
        "(organic traffic)."
    )
    payback_days: int | None = Field(
        description="First day since install (0 = install day) on which cumulative net revenue covers spend; "
        "null when not reached within the window, or without spend."
    )
    ltv_projected: float


class PaybackMeta(BaseModel):
    currency: str
    generated_at: str | None = Field(description="Materialization time; null before the first refresh.")
    cohort_window_days: int


class PaybackReport(BaseModel):
    data: list[PaybackRow]
    meta: PaybackMeta


class CohortWeek(BaseModel):
    week: int
    retained_pct: float = Field(
        description="Fraction of the users whose week is complete that were active in it (week 0: 1.0)."
    )
    cumulative_revenue: float = Field(
        description="Net revenue per user through this week: the running sum of each week's revenue per "
        "user, each week over the users whose week is complete (docs/metrics.md)."
    )
    users: int = Field(
        description="The users this week is estimated from (installs of the cohorts whose week is complete); "
        f"weeks from fewer than {MIN_WEEK_USERS} are left out."
    )


class CohortCurve(BaseModel):
    label: str
    weeks: list[CohortWeek]


class CohortsReport(BaseModel):
    cohorts: list[CohortCurve]
