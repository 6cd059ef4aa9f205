"""Dashboard sign-in: one-time login links and the sessions they become.

New tables only, on both databases. Tokens and session ids are stored as SHA-256 hex, never in
clear (warehouse/dashboard/tables.py). The downgrade drops both tables: every operator signed in
is signed out, and unused links stop working.

Revision ID: 0150
Revises: 0140
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0150"
down_revision = "0140"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "dashboard_login_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("operator", sa.String(254), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("used_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_dashboard_login_tokens_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("token_hash", name=op.f("pk_dashboard_login_tokens")),
    )
    op.create_table(
        "dashboard_sessions",
        sa.Column("session_hash", sa.String(64), nullable=False),
        sa.Column("operator", sa.String(254), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_dashboard_sessions_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("session_hash", name=op.f("pk_dashboard_sessions")),
    )
    op.create_index("ix_dashboard_sessions_operator", "dashboard_sessions", ["operator"])


def downgrade() -> None:
    op.drop_index("ix_dashboard_sessions_operator", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
    op.drop_table("dashboard_login_tokens")
