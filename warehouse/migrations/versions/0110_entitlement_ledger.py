"""The entitlement ledger: apps' store identities, grants per purchase, provider notifications.

The old `entitlements` table held one boolean per user, set by an external verifier's last
verdict, with no purchase id and no expiry: nothing in it can become a grant (which purchase?
until when?), so it is dropped, and each user's purchases are linked again by the next receipt the
app sends (apps verify on launch and on restore). The downgrade recreates the table empty.

Revision ID: 0110
Revises: 0100
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0110"
down_revision = "0100"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "app_stores",
        sa.Column("app_id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("ios_bundle_id", sa.String(length=155), nullable=True),
        sa.Column("ios_app_apple_id", sa.BigInteger(), nullable=True),
        sa.Column("ios_environment", sa.String(length=16), nullable=True),
        sa.Column("android_package", sa.String(length=255), nullable=True),
        sa.Column("android_credentials", sa.Text(), nullable=True),
        sa.Column("android_service_account", sa.String(length=320), nullable=True),
        sa.Column("android_push_audience", sa.String(length=500), nullable=True),
        sa.Column("android_push_token_sha256", sa.String(length=64), nullable=True),
        sa.Column("generic_secret", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("ios_environment IN ('Production', 'Sandbox')", name=op.f("ck_app_stores_ios_environment")),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_app_stores_app_id_apps")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_app_stores_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("app_id", name=op.f("pk_app_stores")),
        sa.UniqueConstraint("android_package", name=op.f("uq_app_stores_android_package")),
        sa.UniqueConstraint("android_push_token_sha256", name=op.f("uq_app_stores_android_push_token_sha256")),
        sa.UniqueConstraint("ios_bundle_id", name=op.f("uq_app_stores_ios_bundle_id")),
    )
    with op.batch_alter_table("app_stores", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_app_stores_workspace_id"), ["workspace_id"], unique=False)

    op.create_table(
        "entitlement_grants",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("app_id", sa.String(length=40), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("store_key", sa.String(length=512), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=True),
        sa.Column("product_id", sa.String(length=200), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("environment", sa.String(length=16), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.Column("grace_ends_at", sa.DateTime(), nullable=True),
        sa.Column("access_ends_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.Column("revocation_reason", sa.String(length=200), nullable=True),
        sa.Column("in_trial", sa.Boolean(), nullable=False),
        sa.Column("auto_renew", sa.Boolean(), nullable=True),
        sa.Column("account_token", sa.String(length=200), nullable=True),
        sa.Column("transaction_id", sa.String(length=512), nullable=True),
        sa.Column("stated_at", sa.DateTime(), nullable=False),
        sa.Column("linked_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint("channel IN ('iap', 'web', 'promotional')", name=op.f("ck_entitlement_grants_channel")),
        sa.CheckConstraint("environment IN ('production', 'sandbox')", name=op.f("ck_entitlement_grants_environment")),
        sa.CheckConstraint(
            "kind IN ('subscription', 'lifetime', 'consumable')", name=op.f("ck_entitlement_grants_kind")
        ),
        sa.CheckConstraint(
            "source IN ('ios_store', 'android_store', 'payment_processor', 'subscription_provider_a', 'subscription_provider_b', 'generic-subscription')",
            name=op.f("ck_entitlement_grants_source"),
        ),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_entitlement_grants_app_id_apps")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_entitlement_grants_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_entitlement_grants")),
        sa.UniqueConstraint(
            "app_id", "source", "store_key", name=op.f("uq_entitlement_grants_app_id_source_store_key")
        ),
    )
    with op.batch_alter_table("entitlement_grants", schema=None) as batch_op:
        batch_op.create_index("ix_entitlement_grants_app_user", ["app_id", "user_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_entitlement_grants_workspace_id"), ["workspace_id"], unique=False)

    op.create_table(
        "store_notifications",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("provider", sa.String(length=32), nullable=False),
        sa.Column("dedup_key", sa.String(length=200), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("app_id", sa.String(length=40), nullable=True),
        sa.Column("integration_id", sa.String(length=40), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("headers", sa.JSON(), nullable=False),
        sa.Column("query_string", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("applied_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(
            "provider IN ('ios_store', 'android_store', 'payment_processor', 'subscription_provider_a', 'subscription_provider_b', 'generic-subscription', 'generic-attribution')",
            name=op.f("ck_store_notifications_provider"),
        ),
        sa.CheckConstraint("status IN ('received', 'applied', 'failed')", name=op.f("ck_store_notifications_status")),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_store_notifications_app_id_apps")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_store_notifications_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_store_notifications")),
        sa.UniqueConstraint(
            "workspace_id", "provider", "dedup_key", name=op.f("uq_store_notifications_workspace_id_provider_dedup_key")
        ),
    )
    with op.batch_alter_table("store_notifications", schema=None) as batch_op:
        batch_op.create_index("ix_store_notifications_provider_received", ["provider", "received_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_store_notifications_workspace_id"), ["workspace_id"], unique=False)

    with op.batch_alter_table("entitlements", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_entitlements_workspace_id"))

    op.drop_table("entitlements")


def downgrade() -> None:
    op.create_table(
        "entitlements",
        sa.Column("app_id", sa.VARCHAR(length=40), nullable=False),
        sa.Column("user_id", sa.VARCHAR(length=200), nullable=False),
        sa.Column("workspace_id", sa.VARCHAR(length=40), nullable=False),
        sa.Column("active", sa.BOOLEAN(), nullable=False),
        sa.Column("source", sa.VARCHAR(length=32), nullable=False),
        sa.Column("provider", sa.VARCHAR(length=32), nullable=False),
        sa.Column("product_id", sa.VARCHAR(length=200), nullable=True),
        sa.Column("verified_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_entitlements_app_id_apps")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_entitlements_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("app_id", "user_id", name=op.f("pk_entitlements")),
    )
    with op.batch_alter_table("entitlements", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_entitlements_workspace_id"), ["workspace_id"], unique=False)

    with op.batch_alter_table("store_notifications", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_store_notifications_workspace_id"))
        batch_op.drop_index("ix_store_notifications_provider_received")

    op.drop_table("store_notifications")
    with op.batch_alter_table("entitlement_grants", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_entitlement_grants_workspace_id"))
        batch_op.drop_index("ix_entitlement_grants_app_user")

    op.drop_table("entitlement_grants")
    with op.batch_alter_table("app_stores", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_app_stores_workspace_id"))

    op.drop_table("app_stores")
