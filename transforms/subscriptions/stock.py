"""What one ledger purchase adds to its workspace's live stock (`subscription_stock`): pure.

The live overview must not read every active subscription per request (docs/benchmarks.md: a
grouped scan of 100 000 grants takes a second). So the ledger keeps counts, grouped by what
decides MRR, changed in the transaction that changes a grant: a grant that grants paid access or
a trial now is counted under its `StockEntry`'s key until `counted_until`; the overview takes out
the grants whose time ran out since (one indexed range) and sums a few thousand counts.

A grant counts when it is a production subscription a store or provider stated (a promotional
grant is no payment), not revoked, with access ending in the future. Its entry is its trial
flag, its latest paid price (amount, currency, the price's UTC day: the rate's), the billing
period (the source's, else the standard period nearest its expiry - price time) and product."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime

from transforms.entitlements.facts import PROMOTIONAL
from transforms.subscriptions.billing import nearest_standard


@dataclass(frozen=True)
class StockEntry:
    in_trial: bool
    price_amount: float | None
    price_currency: str | None
    priced_day: str | None  # YYYY-MM-DD (UTC)
    period: str | None  # ISO 8601
    product_id: str | None

    @property
    def key(self) -> str:
        """A stable id of the entry (its values' digest): the counts' primary key."""
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode(), usedforsecurity=False).hexdigest()


def stock_entry(
    *,
    source: str,
    kind: str,
    environment: str,
    in_trial: bool,
    price_amount: float | None,
    price_currency: str | None,
    priced_at: datetime | None,
    billing_period: str | None,
    product_id: str | None,
    expires_at: datetime | None,
) -> StockEntry | None:
    """The grant's entry, or None when it never counts (not a paid or trial subscription)."""
    if source == PROMOTIONAL or kind != "subscription" or environment != "production":
        return None
    period = billing_period
    if period is None and priced_at is not None and expires_at is not None and expires_at > priced_at:
        period = nearest_standard(priced_at, expires_at).iso
    return StockEntry(
        in_trial=bool(in_trial),
        price_amount=price_amount,
        price_currency=price_currency,
        priced_day=priced_at.date().isoformat() if priced_at is not None else None,
        period=period,
        product_id=product_id,
    )


def counted_until(access_ends_at: datetime | None, revoked_at: datetime | None) -> datetime | None:
    """Until when the grant gives access: its access's end, or its revocation if sooner."""
    if access_ends_at is None:
        return None
    if revoked_at is not None and revoked_at < access_ends_at:
        return revoked_at
    return access_ends_at
