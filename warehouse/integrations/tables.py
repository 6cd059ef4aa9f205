"""Tables of the integrations: the connected integrations and their sync history.

`integrations` holds one row per workspace and type (the spec allows one of each): its status,
the non-secret options readable, the credentials only sealed under the instance key
(`transforms.sealing`, bound to the integration id), with the last four characters of each
secret kept apart for display. `sync_state` is the connector's own bookkeeping (cursors,
high-water marks), written only when a sync succeeds.

`integration_syncs` is the history the operator reads and the queue the sensor drains: a
request inserts a `queued` row, the run moves it to `running` and then `succeeded` or
`failed`. `active_for` holds the integration id while the sync is queued or running and NULL
after: its unique index makes "at most one pending sync per integration" a constraint the
database keeps, so two concurrent `POST .../sync` cannot queue two syncs (both databases allow
any number of NULLs in a unique index).
"""

from __future__ import annotations

from typing import get_args

import sqlalchemy as sa

from transforms.integrations.errors import ERROR_CODES
from transforms.integrations.kinds import INTEGRATION_TYPES
from transforms.integrations.status import INTEGRATION_STATUSES, SYNC_STATUSES, SyncTrigger
from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata, one_of

SYNC_TRIGGERS: tuple[str, ...] = get_args(SyncTrigger)

integrations = sa.Table(
    "integrations",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error_message", sa.Text, nullable=True),
    sa.Column("last_synced_at", UTCDateTime(), nullable=True),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("credentials", sa.Text, nullable=True),  # sealed; NULL once disconnected
    sa.Column("credential_hints", sa.JSON, nullable=False),
    sa.Column("cadence_hours", sa.Integer, nullable=False),
    sa.Column("sync_state", sa.JSON, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("type", INTEGRATION_TYPES), name="type"),
    sa.CheckConstraint(one_of("status", INTEGRATION_STATUSES), name="status"),
    sa.UniqueConstraint("workspace_id", "type"),
)

integration_syncs = sa.Table(
    "integration_syncs",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("integration_id", IdString, sa.ForeignKey("integrations.id"), nullable=False),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("active_for", IdString, nullable=True, unique=True),
    sa.Column("queued_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    sa.Column("run_id", sa.String(64), nullable=True),
    sa.Column("records_written", sa.Integer, nullable=False, server_default="0"),
    sa.Column("earliest_record_at", UTCDateTime(), nullable=True),
    sa.Column("error_code", sa.String(16), nullable=True),
    sa.Column("error_message", sa.Text, nullable=True),
    sa.CheckConstraint(one_of("trigger", SYNC_TRIGGERS), name="trigger"),
    sa.CheckConstraint(one_of("status", SYNC_STATUSES), name="status"),
    sa.CheckConstraint(one_of("error_code", ERROR_CODES), name="error_code"),
    # The history of one integration, newest first; and the sensor's queue scan.
    sa.Index("ix_integration_syncs_integration_queued", "integration_id", "queued_at"),
    sa.Index("ix_integration_syncs_status", "status"),
)
