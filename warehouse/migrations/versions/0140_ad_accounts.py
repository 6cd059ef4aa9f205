"""Ad accounts: the connected ad-platform accounts (credentials sealed) and their entity registry.

New tables only, on both databases. `action_executions.ad_account_id` (0130) names an account
without a foreign key: an account removed later keeps its execution history readable.

Revision ID: 0140
Revises: 0130
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0140"
down_revision = "0130"
branch_labels = None
depends_on = None

# The vocabularies as of this revision (frozen here: a later change needs its own migration).
PLATFORMS = ("meta", "apple_search_ads", "sandbox")
STATUSES = ("connected", "syncing", "error", "disconnected")
ENTITY_TYPES = ("campaign", "ad_set", "ad_group", "ad")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "ad_accounts",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("platform", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("config", sa.Text(), nullable=True),
        sa.Column("credential_hints", sa.JSON(), nullable=False),
        sa.Column("external_account_id", sa.String(64), nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("last_synced_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(_one_of("platform", PLATFORMS), name=op.f("ck_ad_accounts_platform")),
        sa.CheckConstraint(_one_of("status", STATUSES), name=op.f("ck_ad_accounts_status")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_ad_accounts_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ad_accounts")),
    )
    op.create_index(op.f("ix_ad_accounts_workspace_id"), "ad_accounts", ["workspace_id"])
    op.create_table(
        "ad_entities",
        sa.Column("ad_account_id", sa.String(40), nullable=False),
        sa.Column("entity_type", sa.String(16), nullable=False),
        sa.Column("external_id", sa.String(64), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("parent_external_id", sa.String(64), nullable=True),
        sa.Column("name", sa.String(400), nullable=False),
        sa.Column("report_campaign", sa.String(400), nullable=True),
        sa.Column("report_creative", sa.String(400), nullable=True),
        sa.Column("daily_budget", sa.BigInteger(), nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("edited_at", sa.DateTime(), nullable=True),
        sa.Column("synced_at", sa.DateTime(), nullable=False),
        sa.Column("removed_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(_one_of("entity_type", ENTITY_TYPES), name=op.f("ck_ad_entities_entity_type")),
        sa.ForeignKeyConstraint(
            ["ad_account_id"], ["ad_accounts.id"], name=op.f("fk_ad_entities_ad_account_id_ad_accounts")
        ),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_ad_entities_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("ad_account_id", "entity_type", "external_id", name=op.f("pk_ad_entities")),
    )
    op.create_index(op.f("ix_ad_entities_workspace_campaign"), "ad_entities", ["workspace_id", "report_campaign"])


def downgrade() -> None:
    op.drop_index(op.f("ix_ad_entities_workspace_campaign"), table_name="ad_entities")
    op.drop_table("ad_entities")
    op.drop_index(op.f("ix_ad_accounts_workspace_id"), table_name="ad_accounts")
    op.drop_table("ad_accounts")
