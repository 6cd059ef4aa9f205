"""The stores as the gateway and the processor call them: Apple's `app-store-server-library`
(JWS verification) and Google's Play Developer API (`google-api-python-client`).

Each store module offers `verify_receipt(ctx, ...) -> VerifiedPurchase`, used by
`POST /api/paywall/receipt`, and the processor's handler of its notifications.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from transforms.entitlements.effects import Effect
from warehouse.entitlements.stores import AppStores


class ReceiptRejected(Exception):
    """The store does not vouch for this purchase (bad signature, unknown token, another app or
    environment, no store identities set for the app): 422 with this message."""


@dataclass(frozen=True)
class VerifiedPurchase:
    """A purchase the store vouched for: its app (resolved from what the store signed), its
    ledger effect, and a step to run once the ledger committed (Google: acknowledge it)."""

    stores: AppStores
    effect: Effect
    after_commit: Callable[[], None] | None = None
