"""Integrations: the connected integrations (credentials sealed) and their sync history.

Revision ID: 0100
Revises: 0091
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0100"
down_revision = "0091"
branch_labels = None
depends_on = None

# The vocabularies as of this revision (frozen here: a later change needs its own migration).
TYPES = (
    "attribution_provider_a", "attribution_provider_b", "subscription_provider_a", "subscription_provider_b",
    "warehouse", "payment_processor", "ios_store_connect", "android_store",
)  # fmt: skip
STATUSES = ("connected", "error", "syncing", "disconnected")
SYNC_STATUSES = ("queued", "running", "succeeded", "failed")
TRIGGERS = ("manual", "scheduled")
ERROR_CODES = ("auth", "config", "rate_limited", "provider_error", "bad_response")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "integrations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("last_synced_at", sa.DateTime(), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("credentials", sa.Text(), nullable=True),
        sa.Column("credential_hints", sa.JSON(), nullable=False),
        sa.Column("cadence_hours", sa.Integer(), nullable=False),
        sa.Column("sync_state", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(_one_of("type", TYPES), name=op.f("ck_integrations_type")),
        sa.CheckConstraint(_one_of("status", STATUSES), name=op.f("ck_integrations_status")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_integrations_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_integrations")),
        sa.UniqueConstraint("workspace_id", "type", name=op.f("uq_integrations_workspace_id_type")),
    )
    op.create_table(
        "integration_syncs",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("integration_id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("active_for", sa.String(40), nullable=True),
        sa.Column("queued_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("records_written", sa.Integer(), server_default="0", nullable=False),
        sa.Column("earliest_record_at", sa.DateTime(), nullable=True),
        sa.Column("error_code", sa.String(16), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.CheckConstraint(_one_of("trigger", TRIGGERS), name=op.f("ck_integration_syncs_trigger")),
        sa.CheckConstraint(_one_of("status", SYNC_STATUSES), name=op.f("ck_integration_syncs_status")),
        sa.CheckConstraint(_one_of("error_code", ERROR_CODES), name=op.f("ck_integration_syncs_error_code")),
        sa.ForeignKeyConstraint(
            ["integration_id"], ["integrations.id"], name=op.f("fk_integration_syncs_integration_id_integrations")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_integration_syncs_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_integration_syncs")),
        sa.UniqueConstraint("active_for", name=op.f("uq_integration_syncs_active_for")),
    )
    op.create_index(
        op.f("ix_integration_syncs_integration_queued"), "integration_syncs", ["integration_id", "queued_at"]
    )
    op.create_index(op.f("ix_integration_syncs_status"), "integration_syncs", ["status"])


def downgrade() -> None:
    op.drop_index(op.f("ix_integration_syncs_status"), table_name="integration_syncs")
    op.drop_index(op.f("ix_integration_syncs_integration_queued"), table_name="integration_syncs")
    op.drop_table("integration_syncs")
    op.drop_table("integrations")
