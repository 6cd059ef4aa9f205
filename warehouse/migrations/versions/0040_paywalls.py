"""Paywall configurations: every published version per app and paywall.

Revision ID: 0040
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0040"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "paywall_configs",
        sa.Column("app_id", sa.String(40), nullable=False),
        sa.Column("paywall_id", sa.String(100), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("document", sa.JSON, nullable=False),
        sa.Column("published_by", sa.String(200), nullable=False),
        sa.Column("published_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("app_id", "paywall_id", "version", name="pk_paywall_configs"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name="fk_paywall_configs_app_id_apps"),
        sa.ForeignKeyConstraint(["workspace_id"], ["workspaces.id"], name="fk_paywall_configs_workspace_id_workspaces"),
        sa.CheckConstraint("version >= 1", name="ck_paywall_configs_version"),
    )
    op.create_index("ix_paywall_configs_workspace_id", "paywall_configs", ["workspace_id"])


def downgrade() -> None:
    op.drop_index("ix_paywall_configs_workspace_id", table_name="paywall_configs")
    op.drop_table("paywall_configs")
