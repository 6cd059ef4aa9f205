"""The Payback and Cohorts report pages: charts, the same figures in tables, and CSV downloads.

The figures are v1's (`warehouse.reports.answers` `payback_answer` and `cohorts_answer`, through
the worker's one report reader), validated by v1's own query models (`transforms.reports.answers`),
so a page, its CSV and `GET /v1/reports/...` with the same query answer the same numbers. The
filters are a GET form (the query string is the state: shareable, Back works); with no dates the
page shows the 90 days of cohorts ending on the last data day of the published reports. A query v1 would refuse is
shown again with the error beside its field (400), never as JSON. Charts are drawn by
`static/reports.js` from `<script type="application/json">` blocks (the CSP forbids inline script).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from flask import Response, g, request, url_for
from pydantic import BaseModel, ValidationError

from api.context import state
from api.dashboard import blueprint
from api.dashboard.pages import error_page, page
from api.report_reader import report_reader
from transforms.reports.answers import CohortCurve, CohortsQuery, PaybackQuery, PaybackRow
from transforms.reports.curves import MIN_WEEK_USERS
from transforms.reports.schemas import MAX_WINDOW_DAYS
from warehouse.reports import serving
from warehouse.reports.answers import cohorts_answer, payback_answer
from warehouse.workspaces import get_workspace

# With no dates in the query: the cohorts of the 90 days ending on the reports' last data day.
DEFAULT_DAYS = 90
GROUPS = {"campaign": "Campaign", "creative": "Creative", "country": "Country", "offer": "Offer", "paywall": "Paywall"}
GROUP_PLURALS = {"campaign": "campaigns", "creative": "creatives", "country": "countries", "offer": "offers"}
REFRESH_HINT = "flokit refresh"
PAYBACK_COLUMNS = list(PaybackRow.model_fields)
COHORT_COLUMNS = ["label", "week", "retained_pct", "cumulative_revenue", "users"]


@dataclass(frozen=True)
class Form:
    """A report's filters as typed, the query v1 would run (None if v1 would refuse it), and the
    errors by field, each shown beside its input."""

    values: dict[str, str]
    query: Any
    errors: dict[str, str]
    filtered: bool


def _default_end() -> date:
    """The reports' last data day (`as_of`), else today (UTC): the default range ends there."""
    found = serving.meta(report_reader().cursor()).as_of
    return found or datetime.now(UTC).date()


def _form(
    model: type[BaseModel],
    first: str,
    last: str,
    defaults: dict[str, str],
    *,
    default_end: Callable[[], date] = _default_end,
    range_problem: Callable[[Any], str | None] | None = None,
) -> Form:
    """The query string through v1's model, with v1's own checks and messages; an empty or
    missing field takes the page's default (the dates: the `DEFAULT_DAYS` ending on
    `default_end()`). `range_problem`: v1's own check of the range, where the model has one
    (its message goes beside the last day's field); else v1's `_range` check."""
    given = {k: v.strip() for k, v in request.args.items() if k in model.model_fields and v.strip() != ""}
    values = {**defaults, **given}
    if first not in given and last not in given:
        end = default_end()
        values[first] = (end - timedelta(days=DEFAULT_DAYS - 1)).isoformat()
        values[last] = end.isoformat()
    errors: dict[str, str] = {}
    query = None
    try:
        query = model.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else first
            message = str(error["msg"]).removeprefix("Value error, ")
            errors.setdefault(field, message)
    if query is not None and range_problem is not None:
        problem = range_problem(query)
        if problem is not None:
            errors[last] = problem
            query = None
    elif query is not None and getattr(query, last) < getattr(query, first):
        errors[last] = f"must not be before the first day ({first})"  # v1's `_range` check
        query = None
    return Form(values=values, query=query, errors=errors, filtered=bool(given))


def _as_of(generated_at: str | None) -> str | None:
    return None if generated_at is None else generated_at[:16].replace("T", " ") + " UTC"


def _currency() -> str:
    with state().db.read() as conn:
        return get_workspace(conn, g.workspace_id).reporting_currency


def _money(value: float | None) -> str:
    return "—" if value is None else f"{Decimal(str(value)):,.2f}"


def _percent(value: float | None) -> str:
    """A fraction as a percentage, exactly (v1 rounds ratios to 4 decimals: 2 remain here)."""
    return "—" if value is None else f"{Decimal(str(value)) * 100:.2f} %"


def _payback_text(row: PaybackRow, window: int) -> str:
    if row.payback_days is not None:
        return f"day {row.payback_days}"
    return "no spend" if not row.spend else f"not within {window} days"


def _payback_summary(rows: list[PaybackRow], group_by: str, window: int) -> str:
    """The chart's accessible summary: what a person would read off it; the table has the rest."""
    plural = GROUP_PLURALS.get(group_by, group_by + "s")
    paid = [r for r in rows if r.roas_30d is not None]
    parts = [f"ROAS at 30 days (bars) and payback day (line) for {len(rows)} {plural}."]
    if paid:
        best = max(paid, key=lambda r: r.roas_30d or 0)
        worst = min(paid, key=lambda r: r.roas_30d or 0)
        parts.append(
            f"Highest ROAS: {best.cohort}, {_percent(best.roas_30d)}; "
            f"lowest: {worst.cohort}, {_percent(worst.roas_30d)}."
        )
        back = [r for r in paid if r.payback_days is not None]
        if back:
            fastest = min(back, key=lambda r: r.payback_days or 0)
            parts.append(f"Fastest payback: {fastest.cohort}, day {fastest.payback_days}.")
        parts.append(f"Not paid back within {window} days: {len(paid) - len(back)}.")
    unpaid = len(rows) - len(paid)
    if unpaid:
        parts.append(f"Without spend: {unpaid}.")
    parts.append("Every figure is in the table below.")
    return " ".join(parts)


def _cac_summary(rows: list[PaybackRow], group_by: str, currency: str) -> str:
    plural = GROUP_PLURALS.get(group_by, group_by + "s")
    priced = [r for r in rows if r.cac]
    if not priced:
        return f"Cost per install for {len(rows)} {plural}: none has paid installs. The table below has every figure."
    high = max(priced, key=lambda r: r.cac or 0)
    low = min(priced, key=lambda r: r.cac or 0)
    return (
        f"Cost per install (CAC) in {currency} for {len(rows)} {plural}: highest {high.cohort}, {_money(high.cac)}; "
        f"lowest {low.cohort}, {_money(low.cac)}. Every figure is in the table below."
    )


def _url(endpoint: str, values: dict[str, str]) -> str:
    return url_for(endpoint) + "?" + urlencode(values)


def _csv(name: str, header: list[str], rows: list[list[Any]]) -> Response:
    """A CSV of v1's figures as v1 states them (fractions, not percentages; null as empty)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    response = Response(out.getvalue(), mimetype="text/csv")
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _payback_form() -> Form:
    return _form(PaybackQuery, "start_date", "end_date", {"group_by": "campaign", "cohort_window_days": "30"})


@blueprint.get("/payback")
def payback() -> Response:
    form = _payback_form()
    ctx: dict[str, Any] = {
        "title": "Payback",
        "section": "payback",
        "form": form,
        "groups": GROUPS,
        "max_window": MAX_WINDOW_DAYS,
        "refresh_hint": REFRESH_HINT,
        "default_days": DEFAULT_DAYS,
        "rows": [],
    }
    if form.query is None:
        return page("dashboard/reports/payback.html", 400, **ctx, generated_at=None, as_of=None, checked=False)
    query: PaybackQuery = form.query
    report = payback_answer(report_reader().cursor(), state().db, g.workspace_id, query)
    rows = report.data
    window = query.cohort_window_days
    canonical = {
        "start_date": query.start_date.isoformat(),
        "end_date": query.end_date.isoformat(),
        "group_by": query.group_by,
        "cohort_window_days": str(window),
    }
    chart = {
        "labels": [r.cohort for r in rows],
        "roas_30d": [r.roas_30d for r in rows],
        "payback_days": [r.payback_days for r in rows],
        "cac": [r.cac for r in rows],
        "currency": report.meta.currency,
        "window": window,
        "group": GROUPS[query.group_by],
    }
    ctx.update(
        checked=True,
        query=query,
        group_label=GROUPS[query.group_by],
        currency=report.meta.currency,
        generated_at=report.meta.generated_at,
        as_of=_as_of(report.meta.generated_at),
        table=[
            {
                "row": r,
                "spend": _money(r.spend),
                "cac": _money(r.cac),
                "conversion": _percent(r.trial_conversion_rate),
                "roas": _percent(r.roas_30d) if r.roas_30d is not None else "no spend",
                "payback": _payback_text(r, window),
                "ltv": _money(r.ltv_projected),
            }
            for r in rows
        ],
        rows=rows,
        chart=chart,
        summary=_payback_summary(rows, query.group_by, window),
        cac_summary=_cac_summary(rows, query.group_by, report.meta.currency),
        csv_url=_url("dashboard.payback_csv", canonical),
        clear_url=url_for("dashboard.payback"),
    )
    return page("dashboard/reports/payback.html", **ctx)


@blueprint.get("/payback.csv")
def payback_csv() -> Response:
    form = _payback_form()
    if form.query is None:
        return _invalid(form)
    query: PaybackQuery = form.query
    report = payback_answer(report_reader().cursor(), state().db, g.workspace_id, query)
    name = f"payback-{query.group_by}-{query.start_date}-{query.end_date}-{query.cohort_window_days}d.csv"
    return _csv(name, PAYBACK_COLUMNS, [[getattr(r, c) for c in PAYBACK_COLUMNS] for r in report.data])


def _invalid(form: Form) -> Response:
    """A CSV link with a query v1 would refuse: the HTML error page, with v1's message."""
    first = next(iter(form.errors.items()))
    return error_page(400, f"Invalid query parameter '{first[0]}': {first[1]}")


def _cohorts_form() -> Form:
    return _form(CohortsQuery, "cohort_start", "cohort_end", {"group_by": "campaign"})


def _immature_from(curve: CohortCurve) -> int | None:
    """The first week estimated from fewer users than week 0: from there on, the younger cohorts in
    the range have not lived through the week yet, and the point stands for the older ones only."""
    base = curve.weeks[0].users if curve.weeks else 0
    return next((w.week for w in curve.weeks if w.users < base), None)


def _cohorts_summary(curves: list[CohortCurve], group_by: str, currency: str) -> tuple[str, str]:
    plural = GROUP_PLURALS.get(group_by, group_by + "s")
    retention = [f"Weekly retention of {len(curves)} {plural}."]
    revenue = [f"Cumulative net revenue per user in {currency}, weekly, for {len(curves)} {plural}."]
    for curve in curves:
        last = curve.weeks[-1]
        retention.append(f"{curve.label}: {_percent(last.retained_pct)} at week {last.week}.")
        revenue.append(f"{curve.label}: {_money(last.cumulative_revenue)} by week {last.week}.")
    tail = "Dashed segments: weeks only some of the cohorts have reached. Every figure is in the table below."
    return " ".join([*retention, tail]), " ".join([*revenue, tail])


@blueprint.get("/cohorts")
def cohorts() -> Response:
    form = _cohorts_form()
    ctx: dict[str, Any] = {
        "title": "Cohorts",
        "section": "cohorts",
        "form": form,
        "groups": GROUPS,
        "refresh_hint": REFRESH_HINT,
        "default_days": DEFAULT_DAYS,
        "min_week_users": MIN_WEEK_USERS,
        "curves": [],
    }
    if form.query is None:
        return page("dashboard/reports/cohorts.html", 400, **ctx, generated_at=None, as_of=None, checked=False)
    query: CohortsQuery = form.query
    report, generated_at = cohorts_answer(report_reader().cursor(), g.workspace_id, query)
    currency = _currency()
    curves = report.cohorts
    canonical = {
        "cohort_start": query.cohort_start.isoformat(),
        "cohort_end": query.cohort_end.isoformat(),
        "group_by": query.group_by,
    }
    chart = {
        "weeks": max((len(c.weeks) for c in curves), default=0),
        "currency": currency,
        "curves": [
            {
                "label": c.label,
                "retained_pct": [w.retained_pct for w in c.weeks],
                "cumulative_revenue": [w.cumulative_revenue for w in c.weeks],
                "immature_from": _immature_from(c),
            }
            for c in curves
        ],
    }
    retention_summary, revenue_summary = _cohorts_summary(curves, query.group_by, currency)
    table = []
    for c in curves:
        start = _immature_from(c)
        for w in c.weeks:
            table.append(
                {
                    "label": c.label,
                    "week": w.week,
                    "retained": _percent(w.retained_pct),
                    "revenue": _money(w.cumulative_revenue),
                    "users": w.users,
                    "partial": start is not None and w.week >= start,
                }
            )
    ctx.update(
        checked=True,
        query=query,
        group_label=GROUPS[query.group_by],
        currency=currency,
        generated_at=generated_at,
        as_of=_as_of(generated_at),
        curves=curves,
        chart=chart,
        table=table,
        retention_summary=retention_summary,
        revenue_summary=revenue_summary,
        csv_url=_url("dashboard.cohorts_csv", canonical),
        clear_url=url_for("dashboard.cohorts"),
    )
    return page("dashboard/reports/cohorts.html", **ctx)


@blueprint.get("/cohorts.csv")
def cohorts_csv() -> Response:
    form = _cohorts_form()
    if form.query is None:
        return _invalid(form)
    query: CohortsQuery = form.query
    report, _ = cohorts_answer(report_reader().cursor(), g.workspace_id, query)
    rows = [[c.label, w.week, w.retained_pct, w.cumulative_revenue, w.users] for c in report.cohorts for w in c.weeks]
    return _csv(f"cohorts-{query.group_by}-{query.cohort_start}-{query.cohort_end}.csv", COHORT_COLUMNS, rows)
