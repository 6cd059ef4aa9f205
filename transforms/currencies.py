"""The one currency-exponent table: ISO 4217 minor units, and Meta's offsets where Meta differs.

Every budget FloKit reads or writes goes through this module, because two tables that disagree
read a budget 100x or 10x wrong (the registry once stored HUF in fillér while the proposals read
it as forints). The registry keeps integers in the ISO 4217 minor unit, so `exponent` is the ISO
list (ISO 4217 table A.1, "Minor unit"); `pycountry` knows the codes but not the minor units, so
the exceptions to the default of 2 are written out here.

Meta's Marketing API does not count in ISO minor units: its budgets are integers in an "offset"
unit, 100 per major unit for most currencies and 1 for those its currency table lists with offset
1 (https://developers.facebook.com/docs/marketing-api/currencies, column "Offset"). That table
differs from ISO both ways: HUF, TWD, COP, CRC and IDR have two ISO decimals but offset 1; BHD and
JOD have three ISO decimals but offset 100. A currency Meta does not list (KWD, for one) gets the
default 100, the same as the three-decimal dinars it does list. Apple Search Ads sends decimal
strings in major units, so it needs only `exponent`.

Stripe counts amounts in its own minor units (https://docs.stripe.com/currencies, "Zero-decimal
currencies" and "Three-decimal currencies"): like ISO except that ISK, UYI are two-decimal there
and MGA is zero-decimal, and of the ISO three-decimal currencies it supports BHD, JOD, KWD, OMR and
TND. Revenue read from Stripe goes through `stripe_exponent`.
"""

from __future__ import annotations

from typing import Final

_ISO_ZERO: Final = (
    "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND", "VUV", "XAF", "XOF",
    "XPF",
)  # fmt: skip
# ISO 4217 minor-unit exponents other than 2 (ISO 4217 table A.1).
ISO_EXPONENT: Final[dict[str, int]] = {
    **dict.fromkeys(_ISO_ZERO, 0),
    **dict.fromkeys(("BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"), 3),
    **dict.fromkeys(("CLF", "UYW"), 4),
}
# Meta's currencies with offset 1 (developers.facebook.com/docs/marketing-api/currencies); every
# other currency Meta supports has offset 100.
META_OFFSET_ONE: Final = frozenset({"CLP", "COP", "CRC", "HUF", "ISK", "IDR", "JPY", "KRW", "PYG", "TWD", "VND"})


# Stripe's zero-decimal and three-decimal currencies (docs.stripe.com/currencies).
STRIPE_ZERO_DECIMAL: Final = frozenset(
    {"BIF", "CLP", "DJF", "GNF", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF"}
)
STRIPE_THREE_DECIMAL: Final = frozenset({"BHD", "JOD", "KWD", "OMR", "TND"})


def exponent(currency: str) -> int:
    """The ISO 4217 minor-unit exponent: 2 for USD (cents), 0 for JPY, 3 for KWD (fils)."""
    return ISO_EXPONENT.get(currency.upper(), 2)


def meta_offset(currency: str) -> int:
    """Meta's budget integers per major unit of `currency`: 1 or 100."""
    return 1 if currency.upper() in META_OFFSET_ONE else 100


def stripe_exponent(currency: str) -> int:
    """Stripe's minor-unit exponent for `currency`: 0, 3, or else 2."""
    code = currency.upper()
    if code in STRIPE_ZERO_DECIMAL:
        return 0
    return 3 if code in STRIPE_THREE_DECIMAL else 2
