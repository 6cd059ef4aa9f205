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
"""

from __future__ import annotations

import sqlalchemy as sa

from transforms.adaccounts.kinds import ACCOUNT_STATUSES, ENTITY_TYPES, PLATFORMS
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
