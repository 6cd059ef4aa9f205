"""The one currency table: ISO 4217 minor units for the registry, Meta's offsets on Meta's wire, and
the proposals reading a registry budget with the same exponent the executor writes it with."""

from __future__ import annotations

import pytest

from transforms.actions.proposals import RegistryCampaign
from transforms.adaccounts.money import from_meta, to_minor
from transforms.currencies import exponent, meta_offset, stripe_exponent
from transforms.purchases.payment_processor import major_units


def test_iso_minor_units_where_iso_and_meta_disagree() -> None:
    assert [exponent(c) for c in ("USD", "HUF", "TWD", "JPY", "KWD", "BHD", "CLF")] == [2, 2, 2, 0, 3, 3, 4]
    assert [meta_offset(c) for c in ("USD", "HUF", "TWD", "JPY", "KWD", "BHD", "idr")] == [100, 1, 1, 1, 100, 100, 1]


def test_a_registry_budget_reads_back_as_the_major_amount_it_was_written_from() -> None:
    for amount, currency in (("50000", "HUF"), ("50000", "JPY"), ("500.125", "KWD"), ("1200.50", "TWD")):
        campaign = RegistryCampaign("c", "acct", "meta", to_minor(amount, currency), currency, "active", None)
        assert campaign.budget == float(amount), currency
    assert from_meta(50000, "HUF") == to_minor("50000", "HUF")  # Meta's whole forints, ISO's fillér


@pytest.mark.parametrize(
    ("amount", "currency", "major"),
    [(1999, "usd", 19.99), (1000, "JPY", 1000.0), (1500, "KWD", 1.5), (500, "MGA", 500.0), (100, "ISK", 1.0)],
)
def test_stripe_amounts_read_in_stripes_own_minor_units(amount: int, currency: str, major: float) -> None:
    """Stripe differs from ISO 4217 where its currency page says so: ISK has two decimals at Stripe
    (ISO: none) and MGA none (ISO: two); a KWD amount is in fils, as in ISO."""
    assert major_units(amount, currency) == major
    assert stripe_exponent("ISK") != exponent("ISK") and stripe_exponent("MGA") != exponent("MGA")
