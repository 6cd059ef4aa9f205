"""Analyst catalog views of the reports (`orchestration/catalog.py` builds them into warehouse.duckdb)."""

from __future__ import annotations

from transforms.reports.schemas import CLEAN_SPEND_SCHEMA, COHORT_CURVE_SCHEMA, PAYBACK_SCHEMA
from warehouse.catalog import CatalogView
from warehouse.reports.report_lake import COHORT_CURVES, PAYBACK, SPEND

_GROUP = {
    "workspace_id": "Tenant; every query filters on it.",
    "cohort_date": "UTC day of the users' first install (the cohort).",
    "dimension": "Group-by dimension: campaign, creative, country, offer or paywall.",
    "value": "The group's label in that dimension; organic installs are 'organic', no value is '(none)'.",
}

PAYBACK_VIEW = CatalogView(
    name="payback",
    dataset=PAYBACK,
    description=(
        "Payback cube: cohort day x dimension x value x day since install. Measures are new on that day "
        "(installs and spend on day 0), so SUM(...) WHERE day < N answers any N-day window."
    ),
    schema=PAYBACK_SCHEMA,
    column_comments={
        **_GROUP,
        "day": "Days since install (event date - install date), 0..364.",
        "installs": "Users acquired (first install), on day 0 only.",
        "spend": "Ad spend in the reporting currency, on day 0; offer/paywall groups get a share by installs.",
        "trials": "Trials started on this day.",
        "trial_conversions": "Trials converted to paid on this day.",
        "subscriptions": "Paid subscriptions started on this day (direct or converted trial).",
        "revenue": "Gross revenue charged on this day, reporting currency.",
        "refunds": "Revenue refunded on this day, reporting currency.",
        "cumulative_revenue": "Gross revenue from day 0 through this day (never decreases).",
        "cumulative_net_revenue": "Revenue minus refunds from day 0 through this day.",
    },
)

COHORTS_VIEW = CatalogView(
    name="cohorts",
    dataset=COHORT_CURVES,
    description="Weekly cohort curves: cohort day x dimension x value x week since install, complete weeks only.",
    schema=COHORT_CURVE_SCHEMA,
    column_comments={
        **_GROUP,
        "week": "Weeks since install (days 7w..7w+6).",
        "installs": "Users in this cohort day and group.",
        "active_users": "Users with any event in this week (week 0: everyone).",
        "net_revenue": "Revenue minus refunds in this week.",
        "cumulative_net_revenue": "Revenue minus refunds from week 0 through this week.",
    },
)

SPEND_VIEW = CatalogView(
    name="spend",
    dataset=SPEND,
    description="Daily ad spend by campaign, creative and country, one row per key (restated rows replaced).",
    schema=CLEAN_SPEND_SCHEMA,
    column_comments={
        "workspace_id": "Tenant; every query filters on it.",
        "spend_date": "UTC day the money was spent.",
        "campaign": "Campaign name as the ad platform reports it.",
        "creative": "Creative name.",
        "country": "ISO 3166-1 alpha-2 country.",
        "spend": "Amount spent in the workspace reporting currency (ECB rate of the day), >= 0; null if unconvertible.",
        "amount": "Amount spent as delivered, in `currency` (kept for audit).",
        "currency": "ISO 4217 currency of the delivered amount.",
        "money_issue": "Why `spend` is null: unknown_currency, currency_without_rate or no_reporting_currency.",
    },
)

REPORT_VIEWS = (PAYBACK_VIEW, COHORTS_VIEW, SPEND_VIEW)
