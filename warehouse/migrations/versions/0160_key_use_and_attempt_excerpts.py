"""What the dashboard's keys and webhooks pages show that FloKit did not record before.

Two nullable columns, on both databases:
- `api_keys.last_used_at`: NULL means never used since this revision (shown as "never"). v1
  authentication writes it at most about once a minute per key (`warehouse.workspaces.
  note_key_used`), so it is a coarse "last used", not an access log.
- `webhook_attempts.response_excerpt`: the first characters of the receiver's answer to a send
  (NULL for sends before this revision and when no answer came).
The downgrade drops both columns and what they recorded.

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
    op.add_column("webhook_attempts", sa.Column("response_excerpt", sa.String(length=500), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_attempts") as batch:
        batch.drop_column("response_excerpt")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("last_used_at")
