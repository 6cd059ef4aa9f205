"""API keys remember when they were last used (the dashboard's "last used" column).

One nullable column on `api_keys`, on both databases: NULL means never used since this revision
(shown as "never"). v1 authentication writes it at most about once a minute per key
(`warehouse.workspaces.note_key_used`), so it is a coarse "last used", not an access log. The
downgrade drops the column and what it recorded.

Revision ID: 0160
Revises: 0150
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0160"
down_revision = "0150"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("last_used_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("last_used_at")
