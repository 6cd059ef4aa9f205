"""Tables of outbound webhooks.

- `webhook_endpoints`: where to send, which event types, `enabled`/`disabled`, the opt-in
  Standard Webhooks flag and the count of consecutive failed sends (reset by any success).
- `webhook_secrets`: signing secrets, `active` (one per endpoint) or `retiring` with the expiry
  24 h after rotation. Stored in plaintext because signing needs them (like any HMAC sender).
- `webhook_events`: the outbox; `body` holds the envelope's frozen bytes, signed and sent as is.
- `webhook_deliveries`: one row per (event, endpoint), the queue. `attempt` counts sends made;
  `status` is `pending` (due at `next_attempt_at`), `delivering` (leased until `lease_until` by
  `lease_token`), `succeeded` or `failed` (retries exhausted). `claims` counts leases taken, so
  a crashed run's rows look different to the sensor once their lease expires.
  `resend_from` is set while a resend or recovery waits (`recovery.py`). Endpoints deleted over
  v1 keep their rows (`deleted_at`).
- `webhook_attempts`: one row per physical send: status code or error, the start of the
  receiver's answer, start and end.
- `webhook_drains`: one row per long-lived drain slot, its run's heartbeat and planned end.
"""

from __future__ import annotations

from typing import Literal

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import BigIntKey, IdString, metadata, one_of

# The status vocabularies, declared once (the CHECKs below and the repositories' values).
EndpointStatus = Literal["enabled", "disabled"]
ENDPOINT_STATUSES: tuple[EndpointStatus, ...] = ("enabled", "disabled")
SecretStatus = Literal["active", "retiring"]
SECRET_STATUSES: tuple[SecretStatus, ...] = ("active", "retiring")
DeliveryStatus = Literal["pending", "delivering", "succeeded", "failed"]
DELIVERY_STATUSES: tuple[DeliveryStatus, ...] = ("pending", "delivering", "succeeded", "failed")

webhook_endpoints = sa.Table(
    "webhook_endpoints",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("url", sa.String(2048), nullable=False),
    sa.Column("events", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("standard_webhooks", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
    sa.Column("disabled_at", UTCDateTime(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("status", ENDPOINT_STATUSES), name="status"),
    # Set by DELETE /v1/webhooks/endpoints/{id}: the row stays for the audit log and the history
    # (migration 0225 adds it last).
    sa.Column("deleted_at", UTCDateTime(), nullable=True),
)

webhook_secrets = sa.Table(
    "webhook_secrets",
    metadata,
    sa.Column("id", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("endpoint_id", IdString, sa.ForeignKey("webhook_endpoints.id"), nullable=False, index=True),
    sa.Column("secret", sa.String(4096), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    sa.CheckConstraint(one_of("status", SECRET_STATUSES), name="status"),
)

webhook_events = sa.Table(
    "webhook_events",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("type", sa.String(64), nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("test", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

webhook_deliveries = sa.Table(
    "webhook_deliveries",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("event_id", IdString, sa.ForeignKey("webhook_events.id"), nullable=False, index=True),
    sa.Column("endpoint_id", IdString, sa.ForeignKey("webhook_endpoints.id"), nullable=False),
    sa.Column("workspace_id", IdString, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_at", UTCDateTime(), nullable=True),
    sa.Column("lease_until", UTCDateTime(), nullable=True),
    sa.Column("lease_token", IdString, nullable=True),
    sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_status_code", sa.Integer, nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    # While a resend or a recovery waits for its send: the status to go back to if it fails
    # (`warehouse/webhooks/recovery.py`); such sends do not count in the failure streak.
    sa.Column("resend_from", sa.String(16), nullable=True),
    sa.CheckConstraint(one_of("status", DELIVERY_STATUSES), name="status"),
    sa.Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
    sa.Index("ix_webhook_deliveries_endpoint_created", "endpoint_id", "created_at"),
)

webhook_attempts = sa.Table(
    "webhook_attempts",
    metadata,
    sa.Column("id", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("delivery_id", IdString, sa.ForeignKey("webhook_deliveries.id"), nullable=False, index=True),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("error", sa.String(500), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=False),
    # The first characters of the receiver's answer (decoded as UTF-8, bad bytes replaced); NULL
    # when no answer came. Last, where migration 0160 adds it.
    sa.Column("response_excerpt", sa.String(500), nullable=True),
)

# The long-lived drain runs' heartbeats, one row per drain slot (`orchestration.webhooks.sensors`):
# the run beating, when it last beat and when it means to end. Dagster's run status cannot say
# that a drain's process died (the default launcher leaves a killed run STARTED); a beat can.
webhook_drains = sa.Table(
    "webhook_drains",
    metadata,
    sa.Column("slot", sa.String(16), primary_key=True),
    sa.Column("run_id", sa.String(64), nullable=False),
    sa.Column("beat_at", UTCDateTime(), nullable=False),
    sa.Column("ends_at", UTCDateTime(), nullable=False),
)
