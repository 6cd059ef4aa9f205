"""The live subscription stock (issue 34): counts kept by the ledger's writes.

- `subscription_stock`: per workspace and key (trial or paid, price, currency, the price's day,
  billing period, product), how many grants count now (`warehouse.subscriptions.stock`).
- `entitlement_grants.stock_key`, `stock_ends_at`: the key a grant is counted under and until
  when; indexed with the workspace for the overview's sweep of the ended ones.

The upgrade counts the existing grants (the pure rule of `transforms.subscriptions.stock`, read
through this revision's own columns); the downgrade drops both.

Revision ID: 0210
Revises: 0205
Create Date: 2026-11-29
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from transforms.subscriptions.stock import counted_until, stock_entry

revision = "0210"
down_revision = "0205"
branch_labels = None
depends_on = None

_GRANT_COLUMNS = (
    "id", "workspace_id", "source", "kind", "environment", "in_trial", "price_amount", "price_currency",
    "priced_at", "billing_period", "product_id", "expires_at", "access_ends_at", "revoked_at",
)  # fmt: skip


def _aware(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def upgrade() -> None:
    stock = op.create_table(
        "subscription_stock",
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("stock_key", sa.String(length=40), nullable=False),
        sa.Column("in_trial", sa.Boolean(), nullable=False),
        sa.Column("price_amount", sa.Float(), nullable=True),
        sa.Column("price_currency", sa.String(length=3), nullable=True),
        sa.Column("priced_day", sa.String(length=10), nullable=True),
        sa.Column("period", sa.String(length=32), nullable=True),
        sa.Column("product_id", sa.String(length=200), nullable=True),
        sa.Column("subscriptions", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_subscription_stock_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("workspace_id", "stock_key", name=op.f("pk_subscription_stock")),
    )
    op.add_column("entitlement_grants", sa.Column("stock_key", sa.String(length=40), nullable=True))
    op.add_column("entitlement_grants", sa.Column("stock_ends_at", sa.DateTime(), nullable=True))
    op.create_index("ix_entitlement_grants_stock_ends", "entitlement_grants", ["workspace_id", "stock_ends_at"])
    times = {"priced_at", "expires_at", "access_ends_at", "revoked_at", "stock_ends_at"}
    grants = sa.table(
        "entitlement_grants",
        *(sa.column(c, sa.DateTime()) if c in times else sa.column(c) for c in (*_GRANT_COLUMNS, "stock_ends_at")),
        sa.column("stock_key"),
    )
    bind = op.get_bind()
    now = datetime.now(UTC)
    counts: dict[tuple[str, str], tuple[dict[str, object], int]] = {}
    for row in bind.execute(sa.select(*(grants.c[c] for c in _GRANT_COLUMNS))).all():
        entry = stock_entry(
            source=row.source, kind=row.kind, environment=row.environment, in_trial=bool(row.in_trial),
            price_amount=row.price_amount, price_currency=row.price_currency, priced_at=_aware(row.priced_at),
            billing_period=row.billing_period, product_id=row.product_id, expires_at=_aware(row.expires_at),
        )  # fmt: skip
        until = counted_until(_aware(row.access_ends_at), _aware(row.revoked_at))
        if entry is None or until is None or until <= now:
            continue
        values: dict[str, object] = {
            "in_trial": entry.in_trial, "price_amount": entry.price_amount, "price_currency": entry.price_currency,
            "priced_day": entry.priced_day, "period": entry.period, "product_id": entry.product_id,
        }  # fmt: skip
        found = counts.get((row.workspace_id, entry.key))
        counts[(row.workspace_id, entry.key)] = (values, (found[1] if found else 0) + 1)
        bind.execute(
            sa.update(grants)
            .where(grants.c.id == row.id)
            .values(stock_key=entry.key, stock_ends_at=until.replace(tzinfo=None))
        )
    if counts:
        op.bulk_insert(
            stock,
            [
                {"workspace_id": ws, "stock_key": key, **values, "subscriptions": n}
                for (ws, key), (values, n) in counts.items()
            ],
        )


def downgrade() -> None:
    op.drop_index("ix_entitlement_grants_stock_ends", table_name="entitlement_grants")
    op.drop_column("entitlement_grants", "stock_ends_at")
    op.drop_column("entitlement_grants", "stock_key")
    op.drop_table("subscription_stock")
