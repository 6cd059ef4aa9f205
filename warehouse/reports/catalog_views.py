"""Analyst catalog views of the reports (`orchestration/catalog.py` builds them into warehouse.duckdb)."""

from __future__ import annotations

from transforms.reports.paywall_funnel import PAYWALL_EVENT_SCHEMA
from transforms.reports.schemas import CLEAN_SPEND_SCHEMA, COHORT_CURVE_SCHEMA, PAYBACK_SCHEMA
from transforms.subscriptions.metrics import DAILY_SCHEMA, PAIRED_SCHEMA
from transforms.subscriptions.periods import PURCHASE_SCHEMA
from warehouse.catalog import CatalogView
from warehouse.reports.report_lake import (
    COHORT_CURVES,
    PAYBACK,
    PAYWALL_EVENTS,
    PURCHASES,
    SPEND,
    SUBSCRIPTION_METRICS,
    SUBSCRIPTION_MOVEMENTS,
)

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

_SUBSCRIPTION_GROUP = {
    "workspace_id": "Tenant; every query filters on it.",
    "date": "UTC day; stocks are at its end (the unfinished day: at the refresh).",
    "store": "ios_store, android_store, payment_processor, subscription_provider_a, subscription_provider_b, "
    "generic (demo data: demo).",
    "product_id": "The purchase's latest period's product.",
    "app_id": "The app the ledger holds the purchase under; null where it holds none (demo data).",
    "country": "The user's first install's country (as payback groups); null without one.",
    "campaign": "The user's first install's campaign; null without one.",
}

SUBSCRIPTION_METRICS_VIEW = CatalogView(
    name="subscription_metrics",
    dataset=SUBSCRIPTION_METRICS,
    description=(
        "Subscription metrics per UTC day and group (docs/metrics.md): stocks at the day's end and the day's "
        "flows. Days where every figure of a group is 0 are left out. Sum over groups for totals; for weeks and "
        "months use the API (churn there cancels a lapse and a return within the period)."
    ),
    schema=DAILY_SCHEMA,
    column_comments={
        **_SUBSCRIPTION_GROUP,
        "active_subscriptions": "Paid subscriptions not expired at the day's end (grace counts; trials do not).",
        "active_trials": "Subscriptions in a free trial at the day's end.",
        "mrr": "Monthly recurring revenue at the day's end, reporting currency (RevenueCat's normalization).",
        "new_subscriptions": "First paid periods started (trial conversions included), not reactivations.",
        "new_trials": "Free trials started.",
        "trial_conversions": "Trials whose first paid period started this day.",
        "reactivations": "Paid subscriptions starting again for a user who held none (a same-day lapse in the "
        "same group cancels it).",
        "churned_subscriptions": "Paid subscriptions that ended this day and did not come back the same day in "
        "the same group.",
        "new_customers": "Users whose first billing fact (a trial, a paid period, a one-off purchase) was this day.",
        "paid_transactions": "Charges of the day (subscription periods and one-off purchases).",
        "refunds": "Charges of the day refunded (so far): a refund is booked on its charge's day.",
        "gross_revenue": "Charges of the day, reporting currency at the day's ECB rate.",
        "refunded_revenue": "Amounts refunded of this day's charges.",
        "net_revenue": "gross_revenue - refunded_revenue.",
    },
)

SUBSCRIPTION_MOVEMENTS_VIEW = CatalogView(
    name="subscription_movements",
    dataset=SUBSCRIPTION_MOVEMENTS,
    description=(
        "Lapses (movement = churn) and returns (movement = reactivation) per day and group, each with the day "
        "and group of its pair (the return that healed the lapse, the lapse the return healed): churn of a "
        "week or month counts the lapses whose pair is not in the same period and group."
    ),
    schema=PAIRED_SCHEMA,
    column_comments={
        **_SUBSCRIPTION_GROUP,
        "movement": "churn (a paid subscription lapsed) or reactivation (a user without one started one again).",
        "pair_date": "The day of the pair; null when unpaired (never came back; a return healing no lapse).",
        "pair_store": "The pair's store.",
        "pair_product_id": "The pair's product.",
        "pair_app_id": "The pair's app.",
        "count": "How many.",
    },
)

PAYWALL_EVENTS_VIEW = CatalogView(
    name="paywall_events",
    dataset=PAYWALL_EVENTS,
    description=(
        "The paywall funnel as apps report it, one row per step: impressions, offer taps, purchase starts, "
        "trial starts, conversions and cancels, with paywall, variant and offer. Client-reported: a convert is "
        "the app's word; the store-confirmed subscriptions are in subscription_metrics."
    ),
    schema=PAYWALL_EVENT_SCHEMA,
    column_comments={
        "workspace_id": "Tenant; every query filters on it.",
        "event_id": "The canonical event's id (unique per workspace).",
        "event_date": "UTC day of occurred_at (the partition).",
        "occurred_at": "When the app says it happened (UTC).",
        "user_id": "The app's user id.",
        "app_id": "The app that reported it (null for demo data).",
        "step": "impression, offer_tap, purchase_start, trial_start, convert or cancel.",
        "paywall_id": "The paywall shown.",
        "variant_id": "Its variant the user saw.",
        "version": "The published configuration version, when the app sent it.",
        "product_id": "The offer's store product (taps and later steps).",
        "platform": "ios or android.",
        "country": "ISO 3166-1 alpha-2.",
        "source": "paywall (the app's gateway) or demo.",
    },
)

PURCHASES_VIEW = CatalogView(
    name="purchases",
    dataset=PURCHASES,
    description=(
        "Every purchase the entitlement ledger holds (promotional grants are not purchases), one row each, with "
        "its latest state as of the last refresh: store, product, status, when it started and expires, trial, "
        "refund, user and app. Production and sandbox (filter on environment)."
    ),
    schema=PURCHASE_SCHEMA,
    column_comments={
        "workspace_id": "Tenant; every query filters on it.",
        "app_id": "The app the purchase belongs to.",
        "store": "ios_store, android_store, payment_processor, subscription_provider_a, subscription_provider_b, "
        "generic.",
        "purchase_key": "Its lasting id (Apple original transaction id, Google Play first token, Stripe subscription "
        "id, a provider's original transaction id, a generic purchase_id): the canonical events' purchase_key.",
        "user_id": "The app's user it is linked to (null: nobody claimed it yet).",
        "product_id": "The product of its latest statement.",
        "kind": "subscription, lifetime or consumable.",
        "environment": "production or sandbox.",
        "status": "active, in_trial, in_grace, cancelled (auto-renew off, not expired), expired or refunded, at the "
        "refresh (as the customer page decides it).",
        "started_at": "Its first billing event in the lake, else when the ledger first heard of it.",
        "expires_at": "When its current period ends (null: lifetime).",
        "grace_ends_at": "Until when a billing grace period keeps access.",
        "in_trial": "In a free trial per its latest statement.",
        "will_renew": "A subscription with auto-renew on.",
        "refunded": "Revoked (refunded or revoked by its store).",
        "refunded_at": "When it was revoked.",
        "price_amount": "Its latest paid transaction's price, in price_currency (null: none stated yet).",
        "price_currency": "ISO 4217.",
        "billing_period": "ISO 8601 duration, where the source states it.",
        "stated_at": "Time of the statement its state comes from.",
    },
)

REPORT_VIEWS = (
    PAYBACK_VIEW,
    COHORTS_VIEW,
    SPEND_VIEW,
    SUBSCRIPTION_METRICS_VIEW,
    SUBSCRIPTION_MOVEMENTS_VIEW,
    PAYWALL_EVENTS_VIEW,
    PURCHASES_VIEW,
)
