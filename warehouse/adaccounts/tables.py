"""Tables of the ad accounts: the connected accounts and the entity registry.

`ad_accounts` holds one row per connected account (several per workspace and platform are
allowed: a business runs more than one Meta ad account). The credentials are sealed under the
instance key exactly as the integrations' are (`transforms.sealing`, purpose
"ad-account-credentials", bound to the account id), with the last four characters of each secret
kept apart for display; the non-secret options stay readable.

`ad_entities` is the registry a sync keeps: every campaign, ad set / ad group and ad of an
account with its budget (ISO minor units), status and the platform's last edit time, and the
reports' labels it maps to. A sync upserts what the platform lists and marks what it no longer
lists `removed_at` (kept, not deleted: an action's history may name it). For the sandbox platform
the registry is the platform: the executor's writes land in these rows.

`ad_account_sync_requests` is the queue between the dashboard's "Sync now" and Dagster (the web
app never calls a platform): the page inserts a `pending` row, a sensor launches one run per
row (run key = its id), the run moves it to `running` and ends it `succeeded` with the sync's
counts or `failed` with the platform's error text. A partial unique index over the open statuses
keeps at most one open request per account, a rule the database enforces on both databases.
"""

from __future__ import annotations

import sqlalchemy as sa

from transforms.adaccounts.kinds import ACCOUNT_STATUSES, ENTITY_TYPES, PLATFORMS
from transforms.adaccounts.sync_requests import OPEN_WHERE, SYNC_REQUEST_STATUSES
from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata, one_of

ad_accounts = sa.Table(
    "ad_accounts",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("config", sa.Text, nullable=True),  # the sealed secrets; NULL once removed
    sa.Column("credential_hints", sa.JSON, nullable=False),
    sa.Column("external_account_id", sa.String(64), nullable=True),
    sa.Column("currency", sa.String(3), nullable=True),
    sa.Column("last_synced_at", UTCDateTime(), nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("platform", PLATFORMS), name="platform"),
    sa.CheckConstraint(one_of("status", ACCOUNT_STATUSES), name="status"),
)

ad_entities = sa.Table(
    "ad_entities",
    metadata,
    sa.Column("ad_account_id", IdString, sa.ForeignKey("ad_accounts.id"), primary_key=True),
    sa.Column("entity_type", sa.String(16), primary_key=True),
    sa.Column("external_id", sa.String(64), primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("parent_external_id", sa.String(64), nullable=True),
    sa.Column("name", sa.String(400), nullable=False),
    sa.Column("report_campaign", sa.String(400), nullable=True),
    sa.Column("report_creative", sa.String(400), nullable=True),
    sa.Column("daily_budget", sa.BigInteger, nullable=True),
    sa.Column("currency", sa.String(3), nullable=True),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("edited_at", UTCDateTime(), nullable=True),
    sa.Column("synced_at", UTCDateTime(), nullable=False),
    sa.Column("removed_at", UTCDateTime(), nullable=True),
    sa.CheckConstraint(one_of("entity_type", ENTITY_TYPES), name="entity_type"),
    # The engine's look-up: a workspace's objects by the report label they map to.
    sa.Index("ix_ad_entities_workspace_campaign", "workspace_id", "report_campaign"),
)

ad_account_sync_requests = sa.Table(
    "ad_account_sync_requests",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("ad_account_id", IdString, sa.ForeignKey("ad_accounts.id"), nullable=False),
    sa.Column("requested_by", sa.String(200), nullable=False),  # the operator's email
    sa.Column("requested_at", UTCDateTime(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("run_id", sa.String(64), nullable=True),  # the Dagster run that took it
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    # What the sync wrote (`orchestration.adaccounts.sync.SyncResult`); NULL until it succeeded.
    sa.Column("objects_created", sa.Integer, nullable=True),
    sa.Column("objects_updated", sa.Integer, nullable=True),
    sa.Column("objects_unchanged", sa.Integer, nullable=True),
    sa.Column("objects_removed", sa.Integer, nullable=True),
    sa.Column("mapped_campaigns", sa.Integer, nullable=True),
    sa.Column("mapped_creatives", sa.Integer, nullable=True),
    sa.Column("summary", sa.Text, nullable=True),
    sa.Column("error_code", sa.String(16), nullable=True),
    sa.Column("error_message", sa.Text, nullable=True),
    sa.CheckConstraint(one_of("status", SYNC_REQUEST_STATUSES), name="status"),
    # An account's requests, newest first (the page's status block and history).
    sa.Index("ix_ad_account_sync_requests_account_requested", "ad_account_id", "requested_at"),
    # The sensor's scan of the pending and running requests.
    sa.Index("ix_ad_account_sync_requests_status", "status"),
    # At most one open request per account: a second click reads the open one instead.
    sa.Index(
        "uq_ad_account_sync_requests_open",
        "ad_account_id",
        unique=True,
        sqlite_where=sa.text(OPEN_WHERE),
        postgresql_where=sa.text(OPEN_WHERE),
    ),
)
