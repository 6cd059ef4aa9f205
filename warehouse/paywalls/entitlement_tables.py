"""`entitlements`: what each user of each app may use now, as the last receipt verification said.

One row per (app, user), replaced by every verification of that user's purchases: the store is
the source of truth and its latest verdict wins (a refund or an expiry turns `active` off).
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata

entitlements = sa.Table(
    "entitlements",
    metadata,
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), primary_key=True),
    sa.Column("user_id", sa.String(200), primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("source", sa.String(32), nullable=False),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("product_id", sa.String(200), nullable=True),
    sa.Column("verified_at", UTCDateTime(), nullable=False),
)
