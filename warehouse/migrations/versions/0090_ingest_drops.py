"""Ingest: dropped callbacks counted per workspace, vendor, reason and day.

Revision ID: 0090
Revises: 0080
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0090"
down_revision = "0080"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ingest_drops",
        sa.Column(
            "workspace_id",
            sa.String(40),
            sa.ForeignKey("workspaces.id", name=op.f("fk_ingest_drops_workspace_id_workspaces")),
            nullable=False,
        ),
        sa.Column("vendor", sa.String(64), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("last_dropped_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "vendor", "reason", "day", name=op.f("pk_ingest_drops")),
    )


def downgrade() -> None:
    op.drop_table("ingest_drops")
