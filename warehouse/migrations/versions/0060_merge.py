"""Merge the five branches into one line: landing (0003), ingest (0010), actions (0020),
webhooks (0030) and paywalls with entitlements (0040, 0050) each grew from 0002 side by side.

No schema change. From here the history has one head, so `alembic revision` has one parent to
write after; a database migrated before this revision (at the five heads) upgrades through it.

Revision ID: 0060
Revises: 0003, 0010, 0020, 0030, 0050
Create Date: 2026-11-24
"""

revision = "0060"
down_revision = ("0003", "0010", "0020", "0030", "0050")
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
