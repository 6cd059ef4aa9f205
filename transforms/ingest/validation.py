"""The codes and amounts an event may bring in from outside: one set of rules for every entry point.

Ingest callbacks drop a bad field with its reason, `POST /v1/events` answers 400: both apply the
rules here, so an event the one rejects the other rejects too, and the reports never see a code
they cannot place or an amount they cannot sum.

Codes come from a maintained package (`pycountry`: ISO 4217 currencies, ISO 3166-1 countries),
never from a hand list that goes stale when a code is added or withdrawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, Literal

import pycountry

from transforms.event_types import RENEWAL, SUBSCRIPTION_START, TRIAL_CONVERTED

# ISO 4217 also codes things that are not money a user can pay an app with: precious metals
# (XAU gold, XAG silver, XPD palladium, XPT platinum), the IMF's and other bodies' units of
# account (XDR, XSU sucre, XUA ADB unit, XAD Arab accounting dinar), the European bond-market
# units (XBA..XBD), the testing code XTS and XXX ("no currency involved"). An amount "in" one of
# them is a misconfigured callback, never revenue, so they are refused like unknown codes.
NON_MONEY: Final = frozenset(
    {"XAU", "XAG", "XPD", "XPT", "XDR", "XSU", "XUA", "XAD", "XBA", "XBB", "XBC", "XBD", "XTS", "XXX"}
)
CURRENCIES: Final = frozenset(c.alpha_3 for c in pycountry.currencies) - NON_MONEY
COUNTRIES: Final = frozenset(c.alpha_2 for c in pycountry.countries)

# The euro is the reference currency of the ECB rates (1 EUR = rate units of each currency).
REFERENCE_CURRENCY: Final = "EUR"

# Plausible upper bound of ONE event's amount, in EUR. Apple's App Store pricing (December 2022,
# in force for every purchase since May 2023) has price points up to USD 10 000 (the top 100
# only on request); that is EUR 8 500 to 9 500 at the 2022-2026 reference rates, and storefront
# prices include VAT of up to 27 %, so no store charge exceeds about EUR 12 000. Google Play's
# price ranges stay below Apple's top price point. 15 000 leaves headroom for exchange-rate moves
# and still refuses amounts that would poison a sum (the 1e308 reached the payback cube).
MAX_EVENT_AMOUNT_EUR: Final = 15_000.0

# Charges carry gross revenue: a negative charge is not revenue. It is dropped rather than
# booked as a refund, because a refund is its own event (type `refund`) that the vendor sends
# too: booking the sign-flipped charge as well would count the refund twice.
CHARGE_TYPES: Final = frozenset({SUBSCRIPTION_START, TRIAL_CONVERTED, RENEWAL})

MoneyProblem = Literal[
    "unknown_currency", "currency_without_rate", "invalid_revenue", "negative_charge", "amount_out_of_bounds"
]


def valid_country(code: str) -> bool:
    """An assigned ISO 3166-1 alpha-2 code (uppercase). `ZZ` and other user-assigned codes are not."""
    return code in COUNTRIES


def parse_amount(raw: object) -> float | None:
    """A number as sent (a JSON number or a decimal string); None when it is not one."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            return None
    return None


def money_problem(
    event_type: str, amount: float | None, currency: str | None, latest_rates: Mapping[str, float]
) -> MoneyProblem | None:
    """Why an event's amount and currency cannot be booked, or None when they can.

    `latest_rates` is the latest ECB reference rate per currency (units per EUR, EUR itself
    absent or 1). A currency without one is refused at the door: the reports could never
    convert it to a workspace's reporting currency. The amount bound is checked at that latest
    rate; the reports check it again at the rate of the event's own day.

    An amount without a currency is in the workspace's reporting currency, which this check does
    not know (the ingest hot path does not look it up): it is held to the bound in the currency
    where the bound is largest, which still refuses absurd amounts; the reports apply the exact
    bound after conversion.
    """
    if currency is not None:
        if currency not in CURRENCIES:
            return "unknown_currency"
        if currency != REFERENCE_CURRENCY and currency not in latest_rates:
            return "currency_without_rate"
    if amount is None:
        return None
    if not math.isfinite(amount):
        return "invalid_revenue"
    if amount < 0 and event_type in CHARGE_TYPES:
        return "negative_charge"
    if currency is None:
        per_eur = max([1.0, *latest_rates.values()])
    else:
        per_eur = 1.0 if currency == REFERENCE_CURRENCY else latest_rates[currency]
    if abs(amount) / per_eur > MAX_EVENT_AMOUNT_EUR:
        return "amount_out_of_bounds"
    return None
