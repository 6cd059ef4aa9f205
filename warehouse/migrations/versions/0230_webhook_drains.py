"""Webhooks within a second (issue 36 part 2): `webhook_drains`, the drain slots' heartbeats.

One row per slot of the long-lived drain runs, written every 2 s by the run that holds the slot:
the webhook sensor relaunches a slot whose beat is older than 10 s, whatever Dagster's run status
says. Nothing else reads it; the downgrade drops it (the sensor then launches both slots anew).

Revision ID: 0230
Revises: 0225
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0230"
down_revision = "0225"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_drains",
        sa.Column("slot", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("beat_at", sa.DateTime(), nullable=False),
        sa.Column("ends_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("slot", name=op.f("pk_webhook_drains")),
    )


def downgrade() -> None:
    op.drop_table("webhook_drains")
