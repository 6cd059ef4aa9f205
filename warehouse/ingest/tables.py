"""Tables of the ingest gateway.

`ingest_credentials`: a vendor's `app_token` names one workspace; its shared `secret` is stored
only as SHA-256 (secrets are 256-bit random, so a fast hash is safe, as for API keys).
`ingest_event_mappings`: per workspace and vendor, vendor token -> canonical event type.
`ingest_allowlist`: per vendor, the networks callbacks may come from (none listed: any).
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata

ingest_credentials = sa.Table(
    "ingest_credentials",
    metadata,
    sa.Column("vendor", sa.String(64), primary_key=True),
    sa.Column("app_token", sa.String(200), primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("secret_hash", sa.String(64), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("rotated_at", UTCDateTime(), nullable=True),
)

ingest_event_mappings = sa.Table(
    "ingest_event_mappings",
    metadata,
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("vendor", sa.String(64), primary_key=True),
    sa.Column("vendor_token", sa.String(200), primary_key=True),
    sa.Column("event_type", sa.String(64), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)

ingest_allowlist = sa.Table(
    "ingest_allowlist",
    metadata,
    sa.Column("vendor", sa.String(64), primary_key=True),
    sa.Column("cidr", sa.String(64), primary_key=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

# Callbacks dropped, counted per workspace, vendor, reason and UTC day of receipt: what an
# operator reads (`flokit admin ingest drops`) when a vendor's numbers and ours disagree. One
# upsert per dropped callback; accepted callbacks never touch it.
ingest_drops = sa.Table(
    "ingest_drops",
    metadata,
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("vendor", sa.String(64), primary_key=True),
    sa.Column("reason", sa.String(64), primary_key=True),
    sa.Column("day", sa.Date(), primary_key=True),
    sa.Column("count", sa.BigInteger(), nullable=False),
    sa.Column("last_dropped_at", UTCDateTime(), nullable=False),
)
