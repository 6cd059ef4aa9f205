"""GET /v1/reports/payback and /v1/reports/cohorts: read from the published report store.

Answers come from the published report store (`DataPaths.reports`, materialized by the
six-hourly assets) through the worker's one read-only reader (`warehouse.reports.serving`); no
request ever touches raw events. Before the first refresh the reports are empty (`data: []`,
`generated_at: null`), not an error. Each answer is its declared model (`respond`).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

from flask import Response, current_app
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.responses import respond
from api.v1 import blueprint
from transforms.reports.curves import MIN_WEEK_USERS
from transforms.reports.schemas import MAX_WINDOW_DAYS
from transforms.timefmt import iso_z
from warehouse.reports import serving
from warehouse.workspaces import get_workspace

READER = "flokit.reports"
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


def _range(start: date, end: date, first: str, last: str) -> None:
    if end < start:
        raise ApiError(400, f"Invalid query parameter '{last}': must not be before {first}")


def report_reader() -> serving.ReportReader:
    """The worker's reader, created on first use (after gunicorn forked), one per process (the
    dashboard's report pages read through it too)."""
    reader = current_app.extensions.get(READER)
    if reader is None:
        reader = current_app.extensions.setdefault(READER, serving.ReportReader(state().settings.paths.reports))
    return reader


def payback_answer(workspace_id: str, query: PaybackQuery) -> PaybackReport:
    """The payback report for a workspace, from one snapshot of the store: what v1 answers, and
    what the dashboard's Payback page and its CSV show (one computation for both)."""
    cur = report_reader().cursor()
    rows: list[dict[str, Any]] = []
    if cur is not None:
        rows = serving.payback_rows(
            cur,
            workspace_id=workspace_id,
            start=query.start_date,
            end=query.end_date,
            dimension=query.group_by,
            window=query.cohort_window_days,
        )
    with state().db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
    return PaybackReport(
        data=[PaybackRow.model_validate(row) for row in rows],
        meta=PaybackMeta(
            currency=currency,
            generated_at=iso_z(serving.meta(cur).generated_at),
            cohort_window_days=query.cohort_window_days,
        ),
    )


def cohorts_answer(workspace_id: str, query: CohortsQuery) -> tuple[CohortsReport, str | None]:
    """The cohort curves for a workspace and, from the same snapshot of the store, when it was
    generated (v1 answers only the curves; the dashboard's Cohorts page also says "data as of")."""
    cur = report_reader().cursor()
    curves: list[dict[str, Any]] = []
    if cur is not None:
        curves = serving.cohort_curves(
            cur, workspace_id=workspace_id, start=query.cohort_start, end=query.cohort_end, dimension=query.group_by
        )
    return CohortsReport.model_validate({"cohorts": curves}), iso_z(serving.meta(cur).generated_at)


@blueprint.get("/reports/payback")
@require_key()
@operation(
    summary="Payback report",
    description="One row per group for the cohorts installed between start_date and end_date, from the "
    "six-hourly materialization (meta.generated_at).",
    query=PaybackQuery,
    responses={200: PaybackReport},
    tags=["reports"],
)
def payback_report(query: PaybackQuery) -> Response:
    _range(query.start_date, query.end_date, "start_date", "end_date")
    return respond(payback_answer(principal().workspace_id, query))


@blueprint.get("/reports/cohorts")
@require_key()
@operation(
    summary="Cohort curves",
    description="Weekly retention and cumulative revenue per group for the cohorts installed in the range.",
    query=CohortsQuery,
    responses={200: CohortsReport},
    tags=["reports"],
)
def cohorts_report(query: CohortsQuery) -> Response:
    _range(query.cohort_start, query.cohort_end, "cohort_start", "cohort_end")
    return respond(cohorts_answer(principal().workspace_id, query)[0])
