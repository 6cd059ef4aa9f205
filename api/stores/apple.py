"""Placeholder until the store's verification lands (issue 17)."""

from __future__ import annotations

from api.processor.framework import Context
from api.stores import ReceiptRejected, VerifiedPurchase


def verify_receipt(ctx: Context, *args: str) -> VerifiedPurchase:
    raise ReceiptRejected("Verification with this store is not available yet")
