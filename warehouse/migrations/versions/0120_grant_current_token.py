"""Entitlement grants: the store's current token of a purchase (`current_token`).

A Google Play subscription is keyed by its first purchase token, but an upgrade, downgrade or
re-signup issues a new token that links back to it, and `purchases.subscriptionsv2.get` on the
earlier token then answers only that it was replaced. The sync re-reads purchases ending soon,
so it needs the newest token; the grant now keeps it.

Existing rows: a Google Play grant gets its `store_key` (the first token), the only token the
ledger knew of it; a sync reading that token and finding it replaced counts it as replaced, as
before, and the next notification or receipt of the newer token records that one. Other sources
read a purchase by its key and stay NULL (a copy of the key would claim a second identifier they
do not have). The downgrade drops the column (what it held is re-learnt from the next
statements).

Revision ID: 0120
Revises: 0110
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0120"
down_revision = "0110"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN of a nullable column is native on both databases (no table copy on SQLite).
    op.add_column("entitlement_grants", sa.Column("current_token", sa.String(length=512), nullable=True))
    grants = sa.table(
        "entitlement_grants", sa.column("source", sa.String), sa.column("store_key", sa.String),
        sa.column("current_token", sa.String),
    )  # fmt: skip
    op.execute(grants.update().where(grants.c.source == "android_store").values(current_token=grants.c.store_key))


def downgrade() -> None:
    # Native on both (SQLite has DROP COLUMN since 3.35, for a column no index or constraint
    # uses): no table copy, so SQLite keeps the table's CHECK constraints as they are.
    op.drop_column("entitlement_grants", "current_token")
