"""Landing path: dedup claims and landed canonical events.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "event_claims",
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("event_id", sa.String(80), nullable=False),
        sa.Column("claimed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("workspace_id", "event_id", name="pk_event_claims"),
    )
    op.create_index("ix_event_claims_claimed_at", "event_claims", ["claimed_at"])
    op.create_table(
        "landed_events",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(80), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("event_type", sa.String(64), nullable=False),
        sa.Column("occurred_at", sa.DateTime(), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("platform", sa.String(16)),
        sa.Column("country", sa.String(2)),
        sa.Column("user_id", sa.String(200)),
        sa.Column("adid", sa.String(200)),
        sa.Column("idfa", sa.String(200)),
        sa.Column("gps_adid", sa.String(200)),
        sa.Column("properties", sa.JSON, nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("in_lake", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_index("ix_landed_events_day", "landed_events", ["day"])
    op.create_index(
        "ix_landed_events_pending",
        "landed_events",
        ["day"],
        sqlite_where=sa.text("NOT in_lake"),
        postgresql_where=sa.text("NOT in_lake"),
    )


def downgrade() -> None:
    op.drop_table("landed_events")
    op.drop_table("event_claims")
