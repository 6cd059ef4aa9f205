"""Entitlement grants: the latest paid transaction's price and billing period (issue 34).

Subscription metrics (MRR, the live overview) read each active subscription's current price
from the ledger: the amount and currency of the latest paid transaction a store or provider
stated (`price_amount`, `price_currency`), its time (`priced_at`, the day whose exchange rate
converts it) and its billing period as an ISO 8601 duration (`billing_period`) where the
source names one. All four are nullable and start NULL: existing rows learn their price from
the next statement that names one (a renewal, a sync). The downgrade drops them.

Revision ID: 0205
Revises: 0200
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0205"
down_revision = "0200"
branch_labels = None
depends_on = None

COLUMNS = ("price_amount", "price_currency", "priced_at", "billing_period")


def upgrade() -> None:
    # ADD COLUMN of a nullable column is native on both databases (no table copy on SQLite).
    op.add_column("entitlement_grants", sa.Column("price_amount", sa.Float(), nullable=True))
    op.add_column("entitlement_grants", sa.Column("price_currency", sa.String(length=3), nullable=True))
    op.add_column("entitlement_grants", sa.Column("priced_at", sa.DateTime(), nullable=True))
    op.add_column("entitlement_grants", sa.Column("billing_period", sa.String(length=32), nullable=True))


def downgrade() -> None:
    # Native on both (SQLite has DROP COLUMN since 3.35, for a column no index or constraint uses).
    for name in reversed(COLUMNS):
        op.drop_column("entitlement_grants", name)
