"""Ad account "sync now" requests: the durable queue between the dashboard and Dagster.

One new table, on both databases. The dashboard inserts a `pending` row (who asked, when); the
sensor `ad_account_sync_requests_sensor` launches one `ad_accounts_sync_job` run per pending row
(run key = the row's id); the run moves it to `running` and ends it `succeeded` (with the sync's
counts) or `failed` (with the platform's error text). A partial unique index keeps at most one
open (pending or running) request per account, on both databases: two concurrent clicks cannot
queue two syncs. The downgrade drops the table and the history it held.

Revision ID: 0170
Revises: 0160
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0170"
down_revision = "0160"
branch_labels = None
depends_on = None

# The vocabulary as of this revision (frozen here: a later change needs its own migration).
STATUSES = ("pending", "running", "succeeded", "failed")
_OPEN = "status IN ('pending', 'running')"


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    op.create_table(
        "ad_account_sync_requests",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("workspace_id", sa.String(40), nullable=False),
        sa.Column("ad_account_id", sa.String(40), nullable=False),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("requested_at", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("objects_created", sa.Integer(), nullable=True),
        sa.Column("objects_updated", sa.Integer(), nullable=True),
        sa.Column("objects_unchanged", sa.Integer(), nullable=True),
        sa.Column("objects_removed", sa.Integer(), nullable=True),
        sa.Column("mapped_campaigns", sa.Integer(), nullable=True),
        sa.Column("mapped_creatives", sa.Integer(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column("error_code", sa.String(16), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.CheckConstraint(_one_of("status", STATUSES), name=op.f("ck_ad_account_sync_requests_status")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_ad_account_sync_requests_workspace_id_workspaces")
        ),
        sa.ForeignKeyConstraint(
            ["ad_account_id"], ["ad_accounts.id"], name=op.f("fk_ad_account_sync_requests_ad_account_id_ad_accounts")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ad_account_sync_requests")),
    )
    op.create_index(
        "ix_ad_account_sync_requests_account_requested", "ad_account_sync_requests", ["ad_account_id", "requested_at"]
    )
    op.create_index("ix_ad_account_sync_requests_status", "ad_account_sync_requests", ["status"])
    op.create_index(
        "uq_ad_account_sync_requests_open",
        "ad_account_sync_requests",
        ["ad_account_id"],
        unique=True,
        sqlite_where=sa.text(_OPEN),
        postgresql_where=sa.text(_OPEN),
    )


def downgrade() -> None:
    op.drop_index("uq_ad_account_sync_requests_open", table_name="ad_account_sync_requests")
    op.drop_index("ix_ad_account_sync_requests_status", table_name="ad_account_sync_requests")
    op.drop_index("ix_ad_account_sync_requests_account_requested", table_name="ad_account_sync_requests")
    op.drop_table("ad_account_sync_requests")
