"""The canonical event types: the one vocabulary every source maps into.

Vendors speak in their own tokens (an attribution provider's `event_token`, a store's
notification type); workspace mappings translate those tokens into these names, and every
downstream model (payback, cohorts, funnels) groups by them. Adding a type is a one-line change
here; renaming one is a data migration, so names describe the business fact, not a vendor.
"""

from __future__ import annotations

INSTALL = "install"
REATTRIBUTION = "reattribution"
PAYWALL_IMPRESSION = "paywall_impression"
PAYWALL_OFFER_TAP = "paywall_offer_tap"
TRIAL_START = "trial_start"
TRIAL_CONVERTED = "trial_converted"
SUBSCRIPTION_START = "subscription_start"
RENEWAL = "renewal"
CANCELLATION = "cancellation"
REFUND = "refund"
PURCHASE = "purchase"
# Paywall funnel steps as the app reports them (POST /api/paywall/events). Client-reported, so
# kept apart from the billing facts above that stores and providers confirm: a `convert` tap
# is not a subscription until the store says so, and reports never count it as one.
PAYWALL_PURCHASE_START = "paywall_purchase_start"
PAYWALL_TRIAL_START = "paywall_trial_start"
PAYWALL_CONVERT = "paywall_convert"
PAYWALL_CANCEL = "paywall_cancel"

CANONICAL_EVENT_TYPES: frozenset[str] = frozenset(
    {
        INSTALL,  # first open attributed by the vendor
        REATTRIBUTION,  # a returning user re-attributed to a new campaign
        PAYWALL_IMPRESSION,  # a paywall shown (properties: paywall_id, variant_id)
        PAYWALL_OFFER_TAP,  # an offer tapped on a paywall (properties: paywall_id, product_id)
        TRIAL_START,  # free trial begun
        TRIAL_CONVERTED,  # trial turned into the first paid period
        SUBSCRIPTION_START,  # first paid period without a trial
        RENEWAL,  # a later paid period
        CANCELLATION,  # auto-renew turned off (access may continue to period end)
        REFUND,  # money returned; revenue negative in reports
        PURCHASE,  # one-off (non-subscription) purchase
        PAYWALL_PURCHASE_START,  # the app began a store purchase from a paywall
        PAYWALL_TRIAL_START,  # the app reports a trial begun from a paywall
        PAYWALL_CONVERT,  # the app reports a purchase completed from a paywall
        PAYWALL_CANCEL,  # the user left the paywall or cancelled the purchase flow
    }
)

# Types that carry revenue into payback (a refund subtracts it).
REVENUE_EVENT_TYPES: frozenset[str] = frozenset({TRIAL_CONVERTED, SUBSCRIPTION_START, RENEWAL, PURCHASE, REFUND})


def is_canonical(event_type: str) -> bool:
    return event_type in CANONICAL_EVENT_TYPES
