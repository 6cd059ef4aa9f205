"""Column contracts of the report datasets, declared once.

Canonical event types these transforms read (from the one vocabulary, `transforms/event_types.py`):
`install`, `paywall_impression`, `paywall_offer_tap`, `trial_start`, `trial_converted`,
`subscription_start`, `renewal`, `cancellation`, `refund`. Properties read: installs carry
`campaign`, `creative` (country is the event's own column); paywall events carry `paywall_id`,
`variant_id` and the offer as `product_id` (`offer` accepted as an alias); revenue events
(`subscription_start`, `trial_converted`, `renewal`, `refund`) carry `revenue` (a number) and
`currency` (ISO 4217; absent: the workspace reporting currency), converted to the workspace's
reporting currency by `transforms.reports.money`. Any other event type still counts as activity.
"""

from __future__ import annotations

import polars as pl

from transforms.event_types import (
    CANCELLATION,
    INSTALL,
    PAYWALL_IMPRESSION,
    PAYWALL_OFFER_TAP,
    PURCHASE,
    REFUND,
    RENEWAL,
    SUBSCRIPTION_START,
    TRIAL_CONVERTED,
    TRIAL_START,
)

# The canonical types the reports read (the demo generator produces exactly these).
EVENT_TYPES = (
    INSTALL,
    PAYWALL_IMPRESSION,
    PAYWALL_OFFER_TAP,
    TRIAL_START,
    TRIAL_CONVERTED,
    SUBSCRIPTION_START,
    RENEWAL,
    CANCELLATION,
    REFUND,
)
# Events that charge the user: their `revenue` is gross revenue on the day they occur. A one-off
# purchase is a charge too: its refund is subtracted, so its revenue must have been added.
CHARGES = (SUBSCRIPTION_START, TRIAL_CONVERTED, RENEWAL, PURCHASE)
# A paid subscription begins (directly, or when a trial converts).
NEW_SUBSCRIPTIONS = (SUBSCRIPTION_START, TRIAL_CONVERTED)

# Group-by dimensions of the reports (spec: `group_by`), and the label used when a user has none.
DIMENSIONS = ("campaign", "creative", "country", "offer", "paywall")
ORGANIC = "organic"
NONE_LABEL = "(none)"

# Longest cohort window the API accepts (spec limits: 1..365), so the cube keeps days 0..364.
MAX_WINDOW_DAYS = 365
# Weeks of cohort curves kept (a year).
MAX_WEEKS = 52

ACQUISITION_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "installed_at": pl.Datetime("us", "UTC"),
        "cohort_date": pl.Date(),
        "campaign": pl.String(),
        "creative": pl.String(),
        "country": pl.String(),
        "offer": pl.String(),
        "paywall": pl.String(),
        "platform": pl.String(),
    }
)

SUBSCRIPTION_EVENT_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "event_id": pl.String(),
        "event_type": pl.String(),
        "occurred_at": pl.Datetime("us", "UTC"),
        "event_date": pl.Date(),
        "product_id": pl.String(),
        "amount": pl.Float64(),  # the amount as sent, in `currency` (audit); null for non-money events
        "currency": pl.String(),  # as sent, uppercased; null: the reporting currency
        # In the workspace's reporting currency. Gross charge, >= 0 (0 for events that charge
        # nothing or whose amount is excluded); null when the amount could not be converted.
        "revenue": pl.Float64(),
        "refund": pl.Float64(),  # amount refunded, >= 0, as `revenue`
        # Why the amount is not in revenue/refund (transforms.reports.money: UNCONVERTIBLE, EXCLUDED).
        "money_issue": pl.String(),
    }
)

# A user active on a day: any event but an install (what cohort retention counts).
ACTIVE_DAY_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "event_date": pl.Date(),
    }
)

# Raw spend as ad-platform / attribution syncs deliver it (lake dataset `spend_raw`): `spend` in
# `currency`.
SPEND_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "spend_date": pl.Date(),
        "campaign": pl.String(),
        "creative": pl.String(),
        "country": pl.String(),
        "spend": pl.Float64(),
        "currency": pl.String(),
    }
)
SPEND_KEY = ("workspace_id", "spend_date", "campaign", "creative", "country")
# The cleaned `spend` asset: `spend` in the workspace's reporting currency (null when it could
# not be converted, `money_issue` says why), `amount` and `currency` as delivered (audit).
CLEAN_SPEND_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "spend_date": pl.Date(),
        "campaign": pl.String(),
        "creative": pl.String(),
        "country": pl.String(),
        "spend": pl.Float64(),
        "amount": pl.Float64(),
        "currency": pl.String(),
        "money_issue": pl.String(),
    }
)

USER_COHORT_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "user_id": pl.String(),
        "cohort_date": pl.Date(),
        **{d: pl.String() for d in DIMENSIONS},
    }
)

MEASURES: dict[str, pl.DataType] = {
    "installs": pl.Int64(),
    "spend": pl.Float64(),
    "trials": pl.Int64(),
    "trial_conversions": pl.Int64(),
    "subscriptions": pl.Int64(),
    "revenue": pl.Float64(),
    "refunds": pl.Float64(),
}

PAYBACK_KEY = ("workspace_id", "cohort_date", "dimension", "value", "day")
# One daily partition of the cube: the rows whose activity day (cohort_date + day) is that day.
PAYBACK_DAILY_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "cohort_date": pl.Date(),
        "dimension": pl.String(),
        "value": pl.String(),
        "day": pl.Int32(),
        **MEASURES,
    }
)
PAYBACK_SCHEMA = pl.Schema(
    {
        **PAYBACK_DAILY_SCHEMA,
        "cumulative_revenue": pl.Float64(),
        "cumulative_net_revenue": pl.Float64(),
    }
)

# One daily partition of weekly activity: users whose first event of a week-since-install fell on
# that day (week 0: the install itself), and the net revenue of that day, per cohort and group.
COHORT_ACTIVITY_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "cohort_date": pl.Date(),
        "dimension": pl.String(),
        "value": pl.String(),
        "week": pl.Int32(),
        "active_users": pl.Int64(),
        "net_revenue": pl.Float64(),
    }
)
# A user's first event of a week lies at most this many days before any later event of that week.
WEEK_LOOKBACK_DAYS = 6

COHORT_CURVE_KEY = ("workspace_id", "cohort_date", "dimension", "value", "week")
COHORT_CURVE_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "cohort_date": pl.Date(),
        "dimension": pl.String(),
        "value": pl.String(),
        "week": pl.Int32(),
        "installs": pl.Int64(),
        "active_users": pl.Int64(),
        "net_revenue": pl.Float64(),
        "cumulative_net_revenue": pl.Float64(),
    }
)

LTV_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "dimension": pl.String(),
        "value": pl.String(),
        "installs": pl.Int64(),
        "alpha": pl.Float64(),
        "beta": pl.Float64(),
        "observed_weeks": pl.Int32(),
        "revenue_per_active_week": pl.Float64(),
        "ltv_projected": pl.Float64(),
    }
)


def empty(schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    return pl.LazyFrame(schema=schema)


# Horizons (days since install) of the growth-action signals' per-user revenue statistics
# (transforms/reports/signals.py): the design's ROAS_7/14/30.
SIGNAL_HORIZONS = (7, 14, 30)
# A cohort's signals read its users' events of days since install 0..SIGNAL_WINDOW_DAYS-1.
SIGNAL_WINDOW_DAYS = max(SIGNAL_HORIZONS)
ACTION_SIGNAL_SCHEMA = pl.Schema(
    {
        "workspace_id": pl.String(),
        "cohort_date": pl.Date(),
        **{d: pl.String() for d in DIMENSIONS},
        "installs": pl.Int64(),
        "spend": pl.Float64(),
        "paywall_users": pl.Int64(),
        "trials": pl.Int64(),
        "trial_conversions": pl.Int64(),
        "subscriptions": pl.Int64(),
        "refunds_n": pl.Int64(),
        **{
            name: kind
            for horizon in SIGNAL_HORIZONS
            for name, kind in ((f"net_rev_d{horizon}", pl.Float64()), (f"net_rev_sq_d{horizon}", pl.Float64()))
        },
        "complete_days": pl.Int32(),
    }
)
