"""Shared by the entitlement tests (ledger, reads, read cache): a purchase's fact and the two ways
into the ledger, so that every suite feeds it the same shape a verified receipt or a
notification would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from transforms.entitlements.facts import StoreFact
from warehouse.db import Database
from warehouse.entitlements import ledger


def fact(key: str = "1000001", *, now: datetime | None = None, **overrides: Any) -> StoreFact:
    """An App Store monthly subscription stated a day before `now` with 29 days left; `now` is
    the call's time unless the test pins one (a module-level time goes stale in a long run)."""
    now = now or datetime.now(UTC)
    values: dict[str, Any] = {
        "source": "ios_store",
        "store_key": key,
        "product_id": "pro_monthly",
        "kind": "subscription",
        "channel": "iap",
        "environment": "production",
        "stated_at": now - timedelta(days=1),
        "expires_at": now + timedelta(days=29),
    }
    return StoreFact(**(values | overrides))


def receipt(db: Database, workspace: dict[str, Any], user: str, f: StoreFact) -> ledger.Applied:
    """`f` shown by the app as `user`'s purchase (`POST /api/paywall/receipt` after verification)."""
    with db.write() as conn:
        return ledger.apply_receipt(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], user_id=user, fact=f
        )


def statement(db: Database, workspace: dict[str, Any], f: StoreFact) -> ledger.Applied:
    """`f` stated by its store (a notification or a sync)."""
    with db.write() as conn:
        return ledger.apply_statement(conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], fact=f)
