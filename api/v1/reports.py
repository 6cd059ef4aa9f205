"""GET /v1/reports/payback and /v1/reports/cohorts: read from the published report store.

Answers come from `reports.duckdb` (materialized by the six-hourly assets) through the worker's
one read-only DuckDB connection; no request ever touches raw events. Before the first refresh
the reports are empty (`data: []`, `generated_at: null`), not an error.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal, TypeVar

from flask import Response, current_app, jsonify, request
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from api.auth import principal, require_key
from api.context import state
from api.errors import ApiError
from api.v1 import blueprint
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


Q = TypeVar("Q", bound=BaseModel)


def _parse(model: type[Q], first: str, last: str) -> tuple[Q, date, date]:
    try:
        query = model.model_validate(request.args.to_dict())
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "query"
        message = "is required" if error["type"] == "missing" else error["msg"].removeprefix("Value error, ")
        raise ApiError(400, f"{field}: {message}") from exc
    start, end = getattr(query, first), getattr(query, last)
    if end < start:
        raise ApiError(400, f"{last} must not be before {first}")
    return query, start, end


def _reader() -> serving.ReportReader:
    """The worker's reader, created on first use (after gunicorn forked), one per process."""
    reader = current_app.extensions.get(READER)
    if reader is None:
        reader = current_app.extensions.setdefault(
            READER, serving.ReportReader(serving.reports_path(state().settings.data_dir))
        )
    return reader


@blueprint.get("/reports/payback")
@require_key()
def payback_report() -> Response:
    query, start, end = _parse(PaybackQuery, "start_date", "end_date")
    workspace_id = principal().workspace_id
    cur = _reader().cursor()
    rows: list[dict[str, Any]] = []
    if cur is not None:
        rows = serving.payback_rows(
            cur,
            workspace_id=workspace_id,
            start=start,
            end=end,
            dimension=query.group_by,
            window=query.cohort_window_days,
        )
    with state().db.read() as conn:
        currency = get_workspace(conn, workspace_id).reporting_currency
    return jsonify(
        {
            "data": rows,
            "meta": {
                "currency": currency,
                "generated_at": iso_z(serving.meta(cur).generated_at),
                "cohort_window_days": query.cohort_window_days,
            },
        }
    )


@blueprint.get("/reports/cohorts")
@require_key()
def cohorts_report() -> Response:
    query, start, end = _parse(CohortsQuery, "cohort_start", "cohort_end")
    cur = _reader().cursor()
    curves: list[dict[str, Any]] = []
    if cur is not None:
        curves = serving.cohort_curves(
            cur, workspace_id=principal().workspace_id, start=start, end=end, dimension=query.group_by
        )
    return jsonify({"cohorts": curves})
