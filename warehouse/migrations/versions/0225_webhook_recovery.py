"""Webhook recovery over v1 (issue 36 part 4): resends and deleted endpoints.

Two nullable columns, on both databases:
- `webhook_deliveries.resend_from`: set while a resend (`POST /v1/webhooks/deliveries/{id}/resend`)
  or a recovery (`POST /v1/webhooks/endpoints/{id}/recover`) waits for its send: the status the
  delivery had when it was asked for (`pending`, `succeeded` or `failed`). Such a send is left out
  of the endpoint's failure streak, and if it fails the delivery goes back to that status
  (`pending` schedules the next retry as any failed attempt does). NULL for every other send.
- `webhook_endpoints.deleted_at`: set by `DELETE /v1/webhooks/endpoints/{id}`. The row, its
  deliveries and attempts are kept (the audit log and the delivery history refer to them); the
  API answers 404 for it and nothing is sent to it any more.
The downgrade drops both columns and what they recorded.

Revision ID: 0225
Revises: 0220
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0225"
down_revision = "0220"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("webhook_deliveries", sa.Column("resend_from", sa.String(length=16), nullable=True))
    op.add_column("webhook_endpoints", sa.Column("deleted_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("webhook_endpoints") as batch:
        batch.drop_column("deleted_at")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_column("resend_from")
