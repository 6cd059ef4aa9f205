"""Daily budgets in minor units: one unit for the registry, each platform's own on the wire.

The registry (`ad_entities.daily_budget`) holds integers in the currency's ISO 4217 minor unit
(cents for USD, yen for JPY, fils for KWD), so that a budget of one platform compares with another's
and with the reports' spend. The platforms differ on the wire: Apple Search Ads sends decimal
strings in major units (`{"amount": "500", "currency": "USD"}`); Meta sends integers in its own
"offset" unit, 100 per major unit for most currencies but 1 for the ones Meta lists with offset 1
(its Marketing API currencies page; the design note's [R9]: "USD 100, JPY/KRW/IDR 1"), which is
not always ISO's exponent (HUF, TWD, COP have two ISO decimals but offset 1 at Meta); both tables
are `transforms.currencies`, the only one FloKit has. Conversions
are exact (Decimal, integers); a value the target unit cannot hold exactly is refused, never
rounded silently, because a budget write is absolute.
"""

from __future__ import annotations

from decimal import Decimal

import pycountry

from transforms.currencies import exponent, meta_offset

__all__ = [
    "InexactAmount",
    "exponent",
    "from_meta",
    "is_currency",
    "major_text",
    "meta_offset",
    "to_major",
    "to_meta",
    "to_minor",
]


class InexactAmount(ValueError):
    """An amount the target unit cannot hold exactly (a fraction of a minor unit)."""


def is_currency(code: str) -> bool:
    return len(code) == 3 and pycountry.currencies.get(alpha_3=code.upper()) is not None


def to_minor(amount: Decimal | str, currency: str) -> int:
    """Major units (a decimal string or Decimal) as ISO minor units; exact or `InexactAmount`."""
    scaled = Decimal(amount).scaleb(exponent(currency))
    if scaled != scaled.to_integral_value():
        raise InexactAmount(f"{amount} {currency} is not a whole number of minor units")
    return int(scaled)


def to_major(minor: int, currency: str) -> Decimal:
    """ISO minor units as a Decimal in major units, with the currency's decimals (`500.00`)."""
    return Decimal(minor).scaleb(-exponent(currency))


def major_text(minor: int, currency: str) -> str:
    """The major-unit amount as text with the currency's decimals: Apple's `amount` string."""
    return f"{to_major(minor, currency):.{exponent(currency)}f}"


def from_meta(value: int, currency: str) -> int:
    """Meta's budget integer (its offset unit) as ISO minor units."""
    return to_minor(Decimal(value) / meta_offset(currency), currency)


def to_meta(minor: int, currency: str) -> int:
    """ISO minor units as Meta's budget integer; `InexactAmount` when Meta's unit is coarser."""
    scaled = to_major(minor, currency) * meta_offset(currency)
    if scaled != scaled.to_integral_value():
        raise InexactAmount(f"{to_major(minor, currency)} {currency} is finer than Meta's unit for {currency}")
    return int(scaled)
