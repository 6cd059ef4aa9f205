"""A subscription's billing period and what one payment of it is worth per month (MRR).

MRR normalizes each active subscription's current price to one month with RevenueCat's table,
so that FloKit's figures compare with the ones a team already knows: 1 day x30, 1 week x4,
2 weeks x2, 4 weeks or 1 month x1, 2 months x1/2, 3 months x1/3, 6 months x1/6, 1 year x1/12.
Any other period is normalized by its length: months and years by 1/(months), days and weeks by
30/(days), a mix by 30/(days with a month as 30 days). Factors are exact fractions; the caller
multiplies money by them once, at the end.

Where a period comes from (docs/spec-decisions.md, issue 34): the app's catalog or the store says it, as
`weekly`, `monthly`, `quarterly`, `yearly` or an ISO 8601 duration (`P1M`, `P2W`); otherwise the
paid period's own length, rounded to the nearest standard period (`nearest_standard`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

# A date-only ISO 8601 duration: P[nY][nM][nW][nD], at least one part. Time parts (PT1H) name no
# billing period a store sells.
_ISO = re.compile(r"^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?$")
_WORDS = {"weekly": "P1W", "monthly": "P1M", "quarterly": "P3M", "yearly": "P1Y"}


class BillingPeriodError(ValueError):
    """A billing period that is neither one of the words nor a date-only ISO 8601 duration."""


@dataclass(frozen=True, order=True)
class BillingPeriod:
    years: int = 0
    months: int = 0
    weeks: int = 0
    days: int = 0

    def __post_init__(self) -> None:
        parts = (self.years, self.months, self.weeks, self.days)
        if any(p < 0 for p in parts) or not any(parts):
            raise BillingPeriodError(f"a billing period must be longer than nothing, got {parts}")

    @property
    def iso(self) -> str:
        """The ISO 8601 duration, as FloKit writes it back (`P1M`, `P1Y6M`)."""
        units = zip((self.years, self.months, self.weeks, self.days), "YMWD", strict=True)
        return "P" + "".join(f"{n}{unit}" for n, unit in units if n)

    @property
    def monthly_factor(self) -> Fraction:
        """What one payment for this period counts toward a month's recurring revenue."""
        if self in _STANDARD_FACTORS:
            return _STANDARD_FACTORS[self]
        months = 12 * self.years + self.months
        days = 7 * self.weeks + self.days
        if not days:
            return Fraction(1, months)
        return Fraction(30, 30 * months + days)

    @property
    def nominal_days(self) -> float:
        """Its usual length in days (a month is 365.25/12 days), for telling which period a paid
        period of a given length was."""
        return (12 * self.years + self.months) * 365.25 / 12 + 7 * self.weeks + self.days


_STANDARD_FACTORS: dict[BillingPeriod, Fraction] = {
    BillingPeriod(days=1): Fraction(30),
    BillingPeriod(weeks=1): Fraction(4),
    BillingPeriod(weeks=2): Fraction(2),
    BillingPeriod(weeks=4): Fraction(1),
    BillingPeriod(months=1): Fraction(1),
    BillingPeriod(months=2): Fraction(1, 2),
    BillingPeriod(months=3): Fraction(1, 3),
    BillingPeriod(months=6): Fraction(1, 6),
    BillingPeriod(years=1): Fraction(1, 12),
}
STANDARD_PERIODS: tuple[BillingPeriod, ...] = tuple(sorted(_STANDARD_FACTORS, key=lambda p: p.nominal_days))


def parse_billing_period(text: str) -> BillingPeriod:
    """`weekly`, `monthly`, `quarterly`, `yearly` (any case) or a date-only ISO 8601 duration."""
    value = text.strip()
    iso = _WORDS.get(value.lower(), value.upper())
    match = _ISO.match(iso)
    if match is None or iso == "P":
        raise BillingPeriodError(
            "billing_period must be weekly, monthly, quarterly, yearly or an ISO 8601 duration "
            f"of whole days, weeks, months or years such as P1M or P2W; got {text!r}"
        )
    years, months, weeks, days = (int(group or 0) for group in match.groups())
    if not (years or months or weeks or days):
        raise BillingPeriodError(f"billing_period must be longer than nothing; got {text!r}")
    return BillingPeriod(years, months, weeks, days)


def nearest_standard(started_at: datetime, ends_at: datetime) -> BillingPeriod:
    """The standard period whose usual length is nearest a paid period's own, for a subscription
    whose catalog and store name none. A 28-day February month is `P4W`, worth a month either way;
    a period of 10 days is nearer a week than two. Ties go to the shorter period."""
    if ends_at <= started_at:
        raise ValueError(f"a paid period must end after it starts: {started_at.isoformat()} to {ends_at.isoformat()}")
    days = (ends_at - started_at).total_seconds() / 86400
    return min(STANDARD_PERIODS, key=lambda period: (abs(period.nominal_days - days), period.nominal_days))
