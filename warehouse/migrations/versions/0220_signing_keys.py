"""Signed entitlement answers (issue 36 part 1): `signing_keys`.

The table starts empty: the root key is created by `flokit db upgrade` after the migrations (it
is sealed with the instance key, which a migration has no settings to read), and intermediates
by the first API process that signs. The downgrade drops the table, and with it the keys: apps
that pinned the root would need a new one, so downgrading past this is a key change.

Revision ID: 0220
Revises: 0215
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0220"
down_revision = "0215"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signing_keys",
        sa.Column("kid", sa.String(length=64), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("public_key", sa.String(length=64), nullable=False),
        sa.Column("private_key", sa.Text(), nullable=False),
        sa.Column("chain", sa.String(length=200), nullable=True),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("role IN ('root', 'intermediate')", name=op.f("ck_signing_keys_role")),
        sa.PrimaryKeyConstraint("kid", name=op.f("pk_signing_keys")),
        sa.UniqueConstraint("role", "generation", name=op.f("uq_signing_keys_role_generation")),
    )


def downgrade() -> None:
    op.drop_table("signing_keys")
