"""Outbound webhooks: endpoints, signing secrets, outbox events, deliveries, attempts.

Revision ID: 0030
Revises: 0002
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0030"
down_revision = "0002"
branch_labels = None
depends_on = None

BigIntKey = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("events", sa.JSON, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("standard_webhooks", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("consecutive_failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("disabled_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("status IN ('enabled', 'disabled')", name="ck_webhook_endpoints_status"),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name="fk_webhook_endpoints_workspace_id_workspaces"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_endpoints"),
    )
    op.create_index("ix_webhook_endpoints_workspace_id", "webhook_endpoints", ["workspace_id"])
    op.create_table(
        "webhook_secrets",
        sa.Column("id", BigIntKey, autoincrement=True, nullable=False),
        sa.Column("endpoint_id", sa.String(40), nullable=False),
        sa.Column("secret", sa.String(4096), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint("status IN ('active', 'retiring')", name="ck_webhook_secrets_status"),
        sa.ForeignKeyConstraint(
            ["endpoint_id"], ["webhook_endpoints.id"], name="fk_webhook_secrets_endpoint_id_webhook_endpoints"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_secrets"),
    )
    op.create_index("ix_webhook_secrets_endpoint_id", "webhook_secrets", ["endpoint_id"])
    op.create_table(
        "webhook_events",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("test", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], name="fk_webhook_events_workspace_id_workspaces"),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_events"),
    )
    op.create_index("ix_webhook_events_workspace_id", "webhook_events", ["workspace_id"])
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("event_id", sa.String(40), nullable=False),
        sa.Column("endpoint_id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="0"),
        sa.Column("next_attempt_at", sa.DateTime(), nullable=True),
        sa.Column("lease_until", sa.DateTime(), nullable=True),
        sa.Column("lease_token", sa.String(40), nullable=True),
        sa.Column("claims", sa.Integer, nullable=False, server_default="0"),
        sa.Column("last_status_code", sa.Integer, nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'delivering', 'succeeded', 'failed')", name="ck_webhook_deliveries_status"
        ),
        sa.ForeignKeyConstraint(
            ["event_id"], ["webhook_events.id"], name="fk_webhook_deliveries_event_id_webhook_events"
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"], ["webhook_endpoints.id"], name="fk_webhook_deliveries_endpoint_id_webhook_endpoints"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_deliveries"),
    )
    op.create_index("ix_webhook_deliveries_event_id", "webhook_deliveries", ["event_id"])
    op.create_index("ix_webhook_deliveries_due", "webhook_deliveries", ["status", "next_attempt_at"])
    op.create_index("ix_webhook_deliveries_endpoint_created", "webhook_deliveries", ["endpoint_id", "created_at"])
    op.create_table(
        "webhook_attempts",
        sa.Column("id", BigIntKey, autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(40), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"], ["webhook_deliveries.id"], name="fk_webhook_attempts_delivery_id_webhook_deliveries"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_attempts"),
    )
    op.create_index("ix_webhook_attempts_delivery_id", "webhook_attempts", ["delivery_id"])


def downgrade() -> None:
    op.drop_table("webhook_attempts")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_events")
    op.drop_table("webhook_secrets")
    op.drop_table("webhook_endpoints")
