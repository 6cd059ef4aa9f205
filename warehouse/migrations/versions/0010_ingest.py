"""Measurement ingest: vendor credentials, event mappings, per-vendor IP allowlist.

Revision ID: 0010
Revises: 0002
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_credentials",
        sa.Column("vendor", sa.String(64), nullable=False),
        sa.Column("app_token", sa.String(200), nullable=False),
        sa.Column(
            "workspace_id",
            sa.String(40),
            sa.ForeignKey("workspaces.id", name="fk_ingest_credentials_workspace_id_workspaces"),
            nullable=False,
        ),
        sa.Column("secret_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("rotated_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("vendor", "app_token", name="pk_ingest_credentials"),
    )
    op.create_index("ix_ingest_credentials_workspace_id", "ingest_credentials", ["workspace_id"])
    op.create_table(
        "ingest_event_mappings",
        sa.Column(
            "workspace_id",
            sa.String(40),
            sa.ForeignKey("workspaces.id", name="fk_ingest_event_mappings_workspace_id_workspaces"),
            nullable=False,
        ),
        sa.Column("vendor", sa.String(64), nullable=False),
        sa.Column("vendor_token", sa.String(200), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "vendor", "vendor_token", name="pk_ingest_event_mappings"),
    )
    op.create_table(
        "ingest_allowlist",
        sa.Column("vendor", sa.String(64), nullable=False),
        sa.Column("cidr", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("vendor", "cidr", name="pk_ingest_allowlist"),
    )


def downgrade() -> None:
    op.drop_table("ingest_allowlist")
    op.drop_table("ingest_event_mappings")
    op.drop_index("ix_ingest_credentials_workspace_id", table_name="ingest_credentials")
    op.drop_table("ingest_credentials")
