"""GET /v1/reports/payback, /cohorts and /subscriptions: read from the published report store.

Answers come from the published report store (`DataPaths.reports`, materialized by the
six-hourly assets) through the worker's one read-only reader (`api/report_reader.py`); no
request ever touches raw events. Before the first refresh the reports are empty (`data: []`,
`generated_at: null`), not an error. Each answer is its declared model (`respond`); the query
models and answer shapes are `transforms.reports.answers`, the reads `warehouse.reports.answers`,
shared with the dashboard's report pages.
"""

from __future__ import annotations

from datetime import date

from flask import Response

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.openapi import operation
from api.report_reader import report_reader
from api.responses import respond
from api.v1 import blueprint
from transforms.reports.answers import CohortsQuery, CohortsReport, PaybackQuery, PaybackReport
from transforms.subscriptions.answers import SubscriptionsQuery, SubscriptionsReport
from warehouse.reports.answers import cohorts_answer, payback_answer
from warehouse.subscriptions.answers import subscriptions_answer


def _range(start: date, end: date, first: str, last: str) -> None:
    if end < start:
        raise ApiError(400, f"Invalid query parameter '{last}': must not be before {first}")


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
    return respond(payback_answer(report_reader().cursor(), state().db, principal().workspace_id, query))


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
    return respond(cohorts_answer(report_reader().cursor(), principal().workspace_id, query)[0])


@blueprint.get("/reports/subscriptions")
@require_key()
@operation(
    summary="Subscription metrics (preview)",
    description="Active subscriptions and trials, MRR and ARR, new subscriptions and trials, trial conversions, "
    "reactivations, churn, refunds and revenue per period (day, week from Monday, month) and group, from the "
    "six-hourly materialization (meta.generated_at; the unfinished period reports the state then). Definitions: "
    "docs/metrics.md. Preview.",
    query=SubscriptionsQuery,
    responses={200: SubscriptionsReport},
    tags=["reports"],
)
def subscriptions_report(query: SubscriptionsQuery) -> Response:
    problem = query.range_problem()
    if problem:
        raise ApiError(400, f"Invalid query parameter 'end_date': {problem}")
    return respond(subscriptions_answer(report_reader().cursor(), state().db, principal().workspace_id, query))
