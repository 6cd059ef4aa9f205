"""The subscription report's question and answer (`GET /v1/reports/subscriptions` and the
dashboard's Subscriptions page): query model and answer shape, pure."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from transforms.reports.answers import Day

# At most this far apart (the issue: "at most 3 years apart"): 3 x 365 days and a leap day.
MAX_RANGE_DAYS = 3 * 365 + 1


class SubscriptionsQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")
    start_date: Day
    end_date: Day
    interval: Literal["day", "week", "month"] = "day"
    group_by: Literal["none", "store", "product", "country", "campaign", "app"] = "none"

    def range_problem(self) -> str | None:
        """What is wrong with the range, worded as the other reports word it (None: nothing)."""
        if self.end_date < self.start_date:
            return "must not be before start_date"
        if (self.end_date - self.start_date).days > MAX_RANGE_DAYS:
            return "must be at most 3 years after start_date"
        return None


class SubscriptionsRow(BaseModel):
    period_start: date = Field(description="The period's first day: the day, the week's Monday or the month's 1st.")
    group: str | None = Field(description="The group's value; null with group_by=none (or where it is unknown).")
    active_subscriptions: int = Field(description="Paid subscriptions not expired at the period's end.")
    active_trials: int = Field(description="Subscriptions in a free trial at the period's end.")
    mrr: float = Field(description="Monthly recurring revenue at the period's end, reporting currency.")
    arr: float = Field(description="mrr x 12.")
    new_subscriptions: int
    new_trials: int
    trial_conversions: int
    reactivations: int
    churned_subscriptions: int
    churn_rate: float | None = Field(description="churned / actives at the period's start; null when none were.")
    refunds: int = Field(description="Paid transactions of the period refunded (so far).")
    refund_rate: float | None = Field(description="refunds / paid transactions of the period; null without any.")
    gross_revenue: float
    net_revenue: float = Field(description="gross_revenue - refunds of the period's transactions.")


class SubscriptionsMeta(BaseModel):
    currency: str
    generated_at: str | None = Field(description="Materialization time (the state reported); null before it.")
    interval: str
    group_by: str


class SubscriptionsReport(BaseModel):
    data: list[SubscriptionsRow]
    meta: SubscriptionsMeta


class SubscriptionsOverview(BaseModel):
    active_subscriptions: int = Field(description="Paid subscriptions granting access now (live, from the ledger).")
    active_trials: int = Field(description="Subscriptions in a free trial now.")
    mrr: float = Field(description="Monthly recurring revenue now, reporting currency (docs/metrics.md).")
    arr: float = Field(description="mrr x 12.")
    revenue_last_28_days: float = Field(
        description="Net revenue (charges - refunds) of the 28 days ending today, as of the last refresh (flows_as_of)."
    )
    new_customers_last_28_days: int = Field(
        description="Users whose first trial, paid period or purchase was in those 28 days, as of the last refresh."
    )
    as_of: str = Field(description="When the stock figures were read (now).")
    currency: str
    flows_as_of: str | None = Field(
        description="Preview extension: when the 28-day figures were computed (the last refresh); null before it."
    )
