"""Customers (issue 34): promotional grants, the customer search's indexes, a notification's user.

- `entitlement_grants.source` may be `promotional`: access support grants from the v1 API
  (`POST /v1/customers/{user_id}/entitlements`), kept in the ledger so every entitlement read
  answers it as it answers a store's purchase. The CHECK is rewritten (SQLite: the table is
  recreated in batch mode).
- `entitlement_grants.customer_id`: the source's own id of the paying customer (Stripe customer,
  RevenueCat original app user id, Adapty profile id), which no column kept before; NULL for
  existing rows until their next statement.
- One index per id the customer search matches exactly (`store_key`, `current_token`,
  `transaction_id`, `customer_id`): the unique key leads with app and source, which a search by
  a bare id does not know.
- `store_notifications.user_id`, indexed with the workspace: the user a notification's effects
  were applied to, so a customer's timeline finds the notifications about them. NULL for rows
  applied before (and for notifications that failed before naming anyone).

The downgrade drops what was added; it refuses while promotional grants exist (the old CHECK
could not hold them): end and delete them first.

Revision ID: 0200
Revises: 0190
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0200"
down_revision = "0190"
branch_labels = None
depends_on = None

_OLD_SOURCES = (
    "'ios_store', 'android_store', 'payment_processor', 'subscription_provider_a', 'subscription_provider_b', "
    "'generic-subscription'"
)
_NEW_SOURCES = _OLD_SOURCES + ", 'promotional'"
_SEARCHED = ("store_key", "current_token", "transaction_id", "customer_id")


def upgrade() -> None:
    op.add_column("entitlement_grants", sa.Column("customer_id", sa.String(length=200), nullable=True))
    with op.batch_alter_table("entitlement_grants") as batch:
        batch.drop_constraint(op.f("ck_entitlement_grants_source"), type_="check")
        batch.create_check_constraint(op.f("ck_entitlement_grants_source"), f"source IN ({_NEW_SOURCES})")
    for column in _SEARCHED:
        op.create_index(f"ix_entitlement_grants_{column}", "entitlement_grants", [column])
    op.add_column("store_notifications", sa.Column("user_id", sa.String(length=200), nullable=True))
    op.create_index("ix_store_notifications_workspace_user", "store_notifications", ["workspace_id", "user_id"])


def downgrade() -> None:
    bind = op.get_bind()
    promotional = bind.execute(sa.text("SELECT count(*) FROM entitlement_grants WHERE source = 'promotional'"))
    if promotional.scalar_one():
        raise RuntimeError("promotional grants exist; revision 0190 cannot hold them (delete them first)")
    op.drop_index("ix_store_notifications_workspace_user", table_name="store_notifications")
    op.drop_column("store_notifications", "user_id")
    for column in reversed(_SEARCHED):
        op.drop_index(f"ix_entitlement_grants_{column}", table_name="entitlement_grants")
    with op.batch_alter_table("entitlement_grants") as batch:
        batch.drop_constraint(op.f("ck_entitlement_grants_source"), type_="check")
        batch.create_check_constraint(op.f("ck_entitlement_grants_source"), f"source IN ({_OLD_SOURCES})")
    op.drop_column("entitlement_grants", "customer_id")
