"""Entitlements: each user's verified access per app.

Revision ID: 0050
Revises: 0040
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0050"
down_revision = "0040"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entitlements",
        sa.Column("app_id", sa.String(40), nullable=False),
        sa.Column("user_id", sa.String(200), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("source", sa.String(32), nullable=False),
        sa.Column("provider", sa.String(32), nullable=False),
        sa.Column("product_id", sa.String(200), nullable=True),
        sa.Column("verified_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("app_id", "user_id", name="pk_entitlements"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name="fk_entitlements_app_id_apps"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], name="fk_entitlements_workspace_id_workspaces"),
    )
    op.create_index("ix_entitlements_workspace_id", "entitlements", ["workspace_id"])


def downgrade() -> None:
    op.drop_index("ix_entitlements_workspace_id", table_name="entitlements")
    op.drop_table("entitlements")
