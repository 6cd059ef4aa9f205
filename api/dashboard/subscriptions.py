"""The Subscriptions report page (issue 34, preview): MRR, actives and trials, churn, trial
conversion and refunds over a range, by day, week or month, and its CSV download.

Built as the Payback and Cohorts pages are (`api/dashboard/reports.py`, whose form and CSV
helpers it uses): the filters are v1's `SubscriptionsQuery` in a GET form, refused with v1's own
messages beside the field (400); the figures are `subscriptions_answer`'s, the function behind
`GET /v1/reports/subscriptions`, read from the same snapshot of the published reports, so the
page, its CSV and v1 answer the same numbers for the same query. With no dates the page shows the
90 days ending on the day the reports were generated (the state they report), else today.

The charts are drawn by `static/reports.js` from one `<script type="application/json">` block
(`transforms.subscriptions.charts`: one series per group, the heaviest eight); the table below
them has every row. The live overview (`GET /v1/subscriptions/overview`'s `overview_answer`) is
shown as cards at the top (`reports/_subscriptions_overview.html`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from flask import Response, g, url_for

from api.context import state
from api.dashboard import blueprint
from api.dashboard.pages import page
from api.dashboard.reports import (
    DEFAULT_DAYS,
    REFRESH_HINT,
    Form,
    _as_of,
    _csv,
    _form,
    _invalid,
    _money,
    _percent,
    _url,
)
from api.report_reader import report_reader
from transforms.subscriptions.answers import SubscriptionsQuery, SubscriptionsReport, SubscriptionsRow
from transforms.subscriptions.charts import MAX_SERIES, SubscriptionsChart, subscriptions_chart, trial_conversion
from warehouse.reports import serving
from warehouse.subscriptions.answers import subscriptions_answer
from warehouse.subscriptions.overview import overview_answer

INTERVALS = {"day": "Day", "week": "Week", "month": "Month"}
SUBSCRIPTION_GROUPS = {
    "none": "None",
    "store": "Store",
    "product": "Product",
    "country": "Country",
    "campaign": "Campaign",
    "app": "App",
}
GROUP_PLURALS = {"store": "stores", "product": "products", "country": "countries", "campaign": "campaigns"}
PERIOD_HEADERS = {"day": "Day", "week": "Week (from Monday)", "month": "Month"}
SUBSCRIPTION_COLUMNS = list(SubscriptionsRow.model_fields)
TABLE_NOTE = "Every figure is in the table below."


def _generated_day() -> date:
    """The day the published reports were generated (the last day with a state), else today."""
    generated = serving.meta(report_reader().cursor()).generated_at
    return (generated or datetime.now(UTC)).date()


def _subscriptions_form() -> Form:
    return _form(
        SubscriptionsQuery,
        "start_date",
        "end_date",
        {"interval": "day", "group_by": "none"},
        default_end=_generated_day,
        range_problem=lambda query: query.range_problem(),
    )


def _label(group: str | None, group_by: str) -> str:
    """A group's name as shown: "All" ungrouped; "Unknown" for the rows without the attribute
    (a user with no install for country or campaign, a purchase the ledger does not hold for app)."""
    if group_by == "none":
        return "All"
    return group if group is not None else "Unknown"


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _series_summary(
    chart: SubscriptionsChart,
    group_by: str,
    what: str,
    field: str,
    fmt: Callable[[Any], str],
    labels: list[str],
) -> str:
    """A chart's accessible summary: what a person would read off it (the first and last period's
    values, the highest, or each line's last value when grouped); the table has the rest
    (`TABLE_NOTE`, added once per chart)."""
    periods = chart.periods
    if not periods:
        return f"{what}: no period in the range."
    span = f"{len(periods)} periods from {periods[0]} to {periods[-1]}"
    if group_by == "none":
        values = getattr(chart.series[0], field)
        known = [(p, v) for p, v in zip(periods, values, strict=True) if v is not None]
        if not known:
            return f"{what}, {span}: no value in any period."
        high = max(known, key=lambda pv: pv[1])
        return (
            f"{what}, {span}: {fmt(known[0][1])} in the first period with a value ({known[0][0]}), "
            f"{fmt(known[-1][1])} in the last ({known[-1][0]}); highest {fmt(high[1])} ({high[0]})."
        )
    plural = GROUP_PLURALS.get(group_by, group_by + "s")
    shown = f"{len(chart.series)} of {chart.groups} {plural}" if chart.capped else f"{chart.groups} {plural}"
    lasts = []
    for label, series in zip(labels, chart.series, strict=True):
        last = getattr(series, field)[-1]
        lasts.append(f"{label} {fmt(last) if last is not None else 'none'}")
    return f"{what}, {span}, one line per group ({shown}). In the last period: {'; '.join(lasts)}."


def _chart_data(chart: SubscriptionsChart, labels: list[str], currency: str) -> dict[str, Any]:
    return {
        "labels": [p.isoformat() for p in chart.periods],
        "currency": currency,
        "series": [
            {
                "label": label,
                "mrr": s.mrr,
                "active_subscriptions": s.active_subscriptions,
                "active_trials": s.active_trials,
                "churn_rate": s.churn_rate,
                "trial_conversion": s.trial_conversion,
                "refund_rate": s.refund_rate,
            }
            for label, s in zip(labels, chart.series, strict=True)
        ],
    }


def _table_row(row: SubscriptionsRow, group_by: str) -> dict[str, Any]:
    return {
        "period": row.period_start.isoformat(),
        "group": _label(row.group, group_by),
        "active_subscriptions": _count(row.active_subscriptions),
        "active_trials": _count(row.active_trials),
        "mrr": _money(row.mrr),
        "arr": _money(row.arr),
        "new_subscriptions": _count(row.new_subscriptions),
        "new_trials": _count(row.new_trials),
        "trial_conversions": _count(row.trial_conversions),
        "trial_conversion": _percent(trial_conversion(row)),
        "reactivations": _count(row.reactivations),
        "churned_subscriptions": _count(row.churned_subscriptions),
        "churn_rate": _percent(row.churn_rate),
        "refunds": _count(row.refunds),
        "refund_rate": _percent(row.refund_rate),
        "gross_revenue": _money(row.gross_revenue),
        "net_revenue": _money(row.net_revenue),
    }


def _answer(query: SubscriptionsQuery) -> SubscriptionsReport:
    """v1's answer to the query, from the worker's one report reader (the same snapshot as v1)."""
    return subscriptions_answer(report_reader().cursor(), state().db, g.workspace_id, query)


@blueprint.get("/subscriptions")
def subscriptions() -> Response:
    form = _subscriptions_form()
    app = state()
    overview = overview_answer(app.db, report_reader().cursor(), app.settings.paths, g.workspace_id, datetime.now(UTC))
    ctx: dict[str, Any] = {
        "title": "Subscriptions",
        "section": "subscriptions",
        "overview": overview,
        "overview_money": _money,
        "form": form,
        "groups": SUBSCRIPTION_GROUPS,
        "intervals": INTERVALS,
        "refresh_hint": REFRESH_HINT,
        "default_days": DEFAULT_DAYS,
        "rows": [],
    }
    if form.query is None:
        return page("dashboard/reports/subscriptions.html", 400, **ctx, generated_at=None, as_of=None)
    query: SubscriptionsQuery = form.query
    report = _answer(query)
    rows = report.data
    currency = report.meta.currency
    chart = subscriptions_chart(rows)
    labels = [_label(s.group, query.group_by) for s in chart.series]
    canonical = {
        "start_date": query.start_date.isoformat(),
        "end_date": query.end_date.isoformat(),
        "interval": query.interval,
        "group_by": query.group_by,
    }

    def summary(*parts: tuple[str, str, Callable[[Any], str]]) -> str:
        said = [_series_summary(chart, query.group_by, what, field, fmt, labels) for what, field, fmt in parts]
        return " ".join([*said, TABLE_NOTE])

    interval = INTERVALS[query.interval].lower()
    ctx.update(
        query=query,
        grouped=query.group_by != "none",
        group_label=SUBSCRIPTION_GROUPS[query.group_by],
        period_header=PERIOD_HEADERS[query.interval],
        interval_label=interval,
        currency=currency,
        generated_at=report.meta.generated_at,
        as_of=_as_of(report.meta.generated_at),
        rows=rows,
        table=[_table_row(r, query.group_by) for r in rows],
        chart=_chart_data(chart, labels, currency),
        capped=chart.capped,
        shown_groups=len(chart.series),
        total_groups=chart.groups,
        max_series=MAX_SERIES,
        group_plural=GROUP_PLURALS.get(query.group_by, query.group_by + "s"),
        summaries={
            "mrr": summary((f"MRR in {currency} by {interval}", "mrr", _money)),
            "actives": summary(
                (f"Active subscriptions by {interval}", "active_subscriptions", _count),
                (f"Active trials by {interval}", "active_trials", _count),
            ),
            "churn": summary((f"Churn rate by {interval}", "churn_rate", _percent)),
            "conversion": summary((f"Trial conversion by {interval}", "trial_conversion", _percent)),
            "refunds": summary((f"Refund rate by {interval}", "refund_rate", _percent)),
        },
        csv_url=_url("dashboard.subscriptions_csv", canonical),
        clear_url=url_for("dashboard.subscriptions"),
    )
    return page("dashboard/reports/subscriptions.html", **ctx)


@blueprint.get("/subscriptions.csv")
def subscriptions_csv() -> Response:
    form = _subscriptions_form()
    if form.query is None:
        return _invalid(form)
    query: SubscriptionsQuery = form.query
    report = _answer(query)
    name = f"subscriptions-{query.interval}-{query.group_by}-{query.start_date}-{query.end_date}.csv"
    rows = [[getattr(r, c) for c in SUBSCRIPTION_COLUMNS] for r in report.data]
    return _csv(name, SUBSCRIPTION_COLUMNS, rows)
