"""What subscription metrics read from the database besides the lake's events
(`transforms.subscriptions`): the ledger's latest statement of every production purchase, and
the billing period each app's published paywalls sell a product with (its catalog)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from transforms.customers import GrantState, purchase_status
from transforms.entitlements.facts import PROMOTIONAL
from transforms.subscriptions.periods import CATALOG_SCHEMA, GRANT_SCHEMA
from warehouse.entitlements.tables import entitlement_grants as g
from warehouse.paywalls.tables import paywall_configs as p


def grants_frame(conn: Connection) -> pl.DataFrame:
    """Every production purchase's latest statement (sandbox purchases land no events either)."""
    rows = conn.execute(
        sa.select(
            g.c.workspace_id, g.c.app_id, g.c.source, g.c.store_key, g.c.kind, g.c.expires_at, g.c.grace_ends_at,
            g.c.revoked_at,
        ).where(g.c.environment == "production")
    )  # fmt: skip
    return pl.DataFrame([dict(r._mapping) for r in rows], schema=GRANT_SCHEMA)


def catalog_frame(conn: Connection, workspace_id: str | None = None) -> pl.DataFrame:
    """Each workspace's products with the billing period their live paywall offers name (the
    latest published version of each paywall; a product offered in several, the latest
    publication's; `lifetime` offers name no period). All workspaces', or `workspace_id`'s."""
    versions = sa.select(p.c.app_id, p.c.paywall_id, sa.func.max(p.c.version).label("version"))
    if workspace_id is not None:
        versions = versions.where(p.c.workspace_id == workspace_id)
    latest = versions.group_by(p.c.app_id, p.c.paywall_id).subquery()
    rows = conn.execute(
        sa.select(p.c.workspace_id, p.c.document, p.c.published_at)
        .join(
            latest,
            sa.and_(
                p.c.app_id == latest.c.app_id, p.c.paywall_id == latest.c.paywall_id, p.c.version == latest.c.version
            ),
        )
        .order_by(p.c.published_at)
    )
    found: dict[tuple[str, str], str] = {}
    for row in rows:
        document: dict[str, Any] = row.document
        for variant in document.get("variants", []):
            for offer in variant.get("offers", []):
                period = offer.get("billing_period")
                if period and period != "lifetime":
                    found[(row.workspace_id, offer["product_id"])] = period
    return pl.DataFrame(
        [
            {"workspace_id": ws, "product_id": product, "billing_period": period}
            for (ws, product), period in found.items()
        ],
        schema=CATALOG_SCHEMA,
    )


def ledger_purchases(conn: Connection, now: datetime) -> pl.DataFrame:
    """Every purchase the ledger holds (promotional grants are no purchase), with its status at
    `now` as the customer page decides it (`transforms.customers.purchase_status`)."""
    rows = conn.execute(sa.select(g).where(g.c.source != PROMOTIONAL)).all()
    records = [
        {
            "workspace_id": r.workspace_id, "app_id": r.app_id, "source": r.source, "store_key": r.store_key,
            "user_id": r.user_id, "product_id": r.product_id, "kind": r.kind, "environment": r.environment,
            "status": purchase_status(
                GrantState(r.source, r.kind, r.expires_at, r.grace_ends_at, r.access_ends_at, r.revoked_at,
                           r.in_trial, r.auto_renew),
                now,
            ),
            "recorded_at": r.created_at, "expires_at": r.expires_at, "grace_ends_at": r.grace_ends_at,
            "in_trial": r.in_trial, "auto_renew": r.auto_renew, "revoked_at": r.revoked_at,
            "price_amount": r.price_amount, "price_currency": r.price_currency, "billing_period": r.billing_period,
            "stated_at": r.stated_at,
        }
        for r in rows
    ]  # fmt: skip
    ts = pl.Datetime("us", "UTC")
    schema: dict[str, pl.DataType] = {
        "workspace_id": pl.String(), "app_id": pl.String(), "source": pl.String(), "store_key": pl.String(),
        "user_id": pl.String(), "product_id": pl.String(), "kind": pl.String(), "environment": pl.String(),
        "status": pl.String(), "recorded_at": ts, "expires_at": ts, "grace_ends_at": ts, "in_trial": pl.Boolean(),
        "auto_renew": pl.Boolean(), "revoked_at": ts, "price_amount": pl.Float64(), "price_currency": pl.String(),
        "billing_period": pl.String(), "stated_at": ts,
    }  # fmt: skip
    return pl.DataFrame(records, schema=schema)
