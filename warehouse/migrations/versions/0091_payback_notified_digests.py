"""Reports: the payback digests each workspace was last notified of (`report.payback_updated`).

Revision ID: 0091
Revises: 0090
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0091"
down_revision = "0090"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "payback_notified_digests",
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("cohort_date", sa.Date(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("notified_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name="fk_payback_notified_digests_workspace_id_workspaces"
        ),
        sa.PrimaryKeyConstraint("workspace_id", "cohort_date", name="pk_payback_notified_digests"),
    )


def downgrade() -> None:
    op.drop_table("payback_notified_digests")
