"""`paywall_configs`: every published version of every paywall of every app.

A publish adds a row with the next version (1, 2, ...); the highest version is the live one,
and older rows stay as the history of what was served. The document is the validated JSON of
`transforms.paywall.PaywallDocument`.
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata

paywall_configs = sa.Table(
    "paywall_configs",
    metadata,
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), primary_key=True),
    sa.Column("paywall_id", sa.String(100), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("document", sa.JSON, nullable=False),
    sa.Column("published_by", sa.String(200), nullable=False),
    sa.Column("published_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint("version >= 1", name="version"),
)
