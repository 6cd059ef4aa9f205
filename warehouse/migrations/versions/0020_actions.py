"""Growth actions and their transition history.

Revision ID: 0020
Revises: 0002
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0002"
branch_labels = None
depends_on = None

_STATUSES = "'draft', 'ready', 'approved', 'running', 'completed', 'rejected', 'rolled_back'"


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column(
            "workspace_id",
            sa.String(40),
            sa.ForeignKey("workspaces.id", name="fk_actions_workspace_id_workspaces"),
            nullable=False,
        ),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("previous_status", sa.String(16), nullable=True),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("rationale", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("expected_impact", sa.JSON, nullable=False),
        sa.Column("data_signals", sa.JSON, nullable=False),
        sa.Column("guardrail_checks", sa.JSON, nullable=False),
        sa.Column("rollback_conditions", sa.JSON, nullable=False),
        sa.Column("created_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("approved_at", sa.DateTime(), nullable=True),
        sa.Column("approved_by", sa.String(200), nullable=True),
        sa.Column("rejected_at", sa.DateTime(), nullable=True),
        sa.Column("rejected_by", sa.String(200), nullable=True),
        sa.Column("rolled_back_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(f"status IN ({_STATUSES})", name="ck_actions_status"),
        sa.CheckConstraint("type IN ('budget_shift', 'creative_pause', 'offer_test')", name="ck_actions_type"),
    )
    op.create_index("ix_actions_workspace_created", "actions", ["workspace_id", "created_at", "id"])
    op.create_index("ix_actions_workspace_status_created", "actions", ["workspace_id", "status", "created_at", "id"])
    op.create_table(
        "action_transitions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column(
            "action_id",
            sa.String(40),
            sa.ForeignKey("actions.id", name="fk_action_transitions_action_id_actions"),
            nullable=False,
        ),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("trigger", sa.String(32), nullable=False),
        sa.Column("from_status", sa.String(16), nullable=True),
        sa.Column("to_status", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("key_id", sa.String(40), nullable=True),
        sa.Column("note", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_action_transitions_action", "action_transitions", ["action_id", "id"])


def downgrade() -> None:
    op.drop_table("action_transitions")
    op.drop_table("actions")
