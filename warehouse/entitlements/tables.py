"""Tables of the entitlement ledger (see `transforms.entitlements.facts` for the model).

- `app_stores`: per app, who it is in each store (bundle id, package name, ...) and the
  credentials FloKit verifies with (sealed under the instance key, purpose `app-store-credentials`,
  bound to the app id). A bundle id or package name belongs to one app: notifications find their
  app by it.
- `entitlement_grants`: one row per purchase (`app_id`, `source`, `store_key`), its latest stated
  state and the user it is linked to. `active` is never stored: a read compares
  `access_ends_at` with the clock, so a lapsed subscription stops granting on its own.
  `current_token`: the identifier the store answers for the purchase under now when it is not
  `store_key` (Google Play: the subscription's newest purchase token; NULL for other sources),
  what a sync re-reads the purchase by. `price_amount`, `price_currency`, `priced_at`,
  `billing_period`: the latest paid transaction's price as the sources stated it; a statement
  naming no price keeps them.
- `store_notifications`: every verified provider notification, raw, stored before it is
  acknowledged; `dedup_key` (Apple's notificationUUID, Pub/Sub's messageId, Stripe's event id,
  ...) makes a redelivery apply once.
"""

from __future__ import annotations

import sqlalchemy as sa

from transforms.entitlements.facts import CHANNELS, GRANT_SOURCES, KINDS, SOURCES
from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata, one_of

IOS_ENVIRONMENTS = ("Production", "Sandbox")
NOTIFICATION_STATUSES = ("received", "applied", "failed")
# The seven provider paths' kinds (the generic attribution path lands events, no grants).
NOTIFICATION_PROVIDERS = (*SOURCES, "generic-attribution")

app_stores = sa.Table(
    "app_stores",
    metadata,
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("ios_bundle_id", sa.String(155), nullable=True, unique=True),
    sa.Column("ios_app_apple_id", sa.BigInteger, nullable=True),
    sa.Column("ios_environment", sa.String(16), nullable=True),
    sa.Column("android_package", sa.String(255), nullable=True, unique=True),
    # Google service account JSON (sealed) and, shown in `flokit admin apps stores`, its email.
    sa.Column("android_credentials", sa.Text, nullable=True),
    sa.Column("android_service_account", sa.String(320), nullable=True),
    # Pub/Sub push authentication: an OIDC audience, and/or a secret token in the push URL
    # (SHA-256 hex here; the token itself is shown once).
    sa.Column("android_push_audience", sa.String(500), nullable=True),
    sa.Column("android_push_token_sha256", sa.String(64), nullable=True, unique=True),
    # The generic paths' `Service-Signature` secret (sealed), shown once.
    sa.Column("generic_secret", sa.Text, nullable=True),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    # The service account the push subscription signs its OIDC tokens as (their `email`): an
    # audience alone is not enough, Google signs tokens for any audience for any account. Last,
    # as migration 0180 added it.
    sa.Column("android_push_service_account", sa.String(320), nullable=True),
    sa.CheckConstraint(one_of("ios_environment", IOS_ENVIRONMENTS), name="ios_environment"),
)

entitlement_grants = sa.Table(
    "entitlement_grants",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), nullable=False),
    sa.Column("source", sa.String(32), nullable=False),
    sa.Column("store_key", sa.String(512), nullable=False),
    sa.Column("user_id", sa.String(200), nullable=True),
    sa.Column("product_id", sa.String(200), nullable=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("channel", sa.String(16), nullable=False),
    sa.Column("environment", sa.String(16), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=True),
    sa.Column("grace_ends_at", UTCDateTime(), nullable=True),
    # The later of the two (NULL: never, a lifetime purchase); what a read compares with now.
    sa.Column("access_ends_at", UTCDateTime(), nullable=True),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
    sa.Column("revocation_reason", sa.String(200), nullable=True),
    sa.Column("in_trial", sa.Boolean, nullable=False),
    sa.Column("auto_renew", sa.Boolean, nullable=True),
    sa.Column("account_token", sa.String(200), nullable=True),
    sa.Column("transaction_id", sa.String(512), nullable=True),
    sa.Column("stated_at", UTCDateTime(), nullable=False),
    sa.Column("linked_at", UTCDateTime(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    # Last, as migration 0120 added it (a column added to a table goes at its end).
    sa.Column("current_token", sa.String(512), nullable=True),
    # The source's id of the paying customer (Stripe customer, RevenueCat original app user id,
    # Adapty profile id), as migration 0200 added it: what support searches by.
    sa.Column("customer_id", sa.String(200), nullable=True),
    # The latest paid transaction's price (major units, ISO 4217), its time (the exchange rate's
    # day) and the billing period (ISO 8601) where the source states them: what MRR reads
    # (issue 34). NULL: no source statement named a price yet. Last, as migration 0205 added them.
    sa.Column("price_amount", sa.Float, nullable=True),
    sa.Column("price_currency", sa.String(3), nullable=True),
    sa.Column("priced_at", UTCDateTime(), nullable=True),
    sa.Column("billing_period", sa.String(32), nullable=True),
    # The live stock (`warehouse.subscriptions.stock`): the `subscription_stock` key this grant is
    # counted under and until when (NULL: not counted). Last, as migration 0210 added them.
    sa.Column("stock_key", sa.String(40), nullable=True),
    sa.Column("stock_ends_at", UTCDateTime(), nullable=True),
    sa.UniqueConstraint("app_id", "source", "store_key"),
    sa.Index("ix_entitlement_grants_app_user", "app_id", "user_id"),
    # The customer search's exact matches (`warehouse.customers.search`), one index per id kind:
    # the unique key leads with app and source, which a search by a bare id does not know.
    sa.Index("ix_entitlement_grants_store_key", "store_key"),
    sa.Index("ix_entitlement_grants_current_token", "current_token"),
    sa.Index("ix_entitlement_grants_transaction_id", "transaction_id"),
    sa.Index("ix_entitlement_grants_customer_id", "customer_id"),
    # The overview's sweep: the counted grants whose access ended since (`stock.sweep`).
    sa.Index("ix_entitlement_grants_stock_ends", "workspace_id", "stock_ends_at"),
    sa.CheckConstraint(one_of("source", GRANT_SOURCES), name="source"),
    sa.CheckConstraint(one_of("kind", KINDS), name="kind"),
    sa.CheckConstraint(one_of("channel", CHANNELS), name="channel"),
    sa.CheckConstraint(one_of("environment", ("production", "sandbox")), name="environment"),
)

store_notifications = sa.Table(
    "store_notifications",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("provider", sa.String(32), nullable=False),
    sa.Column("dedup_key", sa.String(200), nullable=False),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False, index=True),
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), nullable=True),
    sa.Column("integration_id", IdString, nullable=True),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("headers", sa.JSON, nullable=False),
    sa.Column("query_string", sa.Text, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("received_at", UTCDateTime(), nullable=False),
    sa.Column("applied_at", UTCDateTime(), nullable=True),
    # The user whose purchases applying it changed (the first, when it named several), set when
    # it is applied, as migration 0200 added it: what a customer's timeline finds it by.
    sa.Column("user_id", sa.String(200), nullable=True),
    sa.UniqueConstraint("workspace_id", "provider", "dedup_key"),
    sa.Index("ix_store_notifications_provider_received", "provider", "received_at"),
    sa.Index("ix_store_notifications_workspace_user", "workspace_id", "user_id"),
    sa.CheckConstraint(one_of("provider", NOTIFICATION_PROVIDERS), name="provider"),
    sa.CheckConstraint(one_of("status", NOTIFICATION_STATUSES), name="status"),
)

# Per workspace, how many grants count under each key (`transforms.subscriptions.stock`): kept in
# the transaction that changes a grant, swept of the ended ones by the overview.
subscription_stock = sa.Table(
    "subscription_stock",
    metadata,
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("stock_key", sa.String(40), primary_key=True),
    sa.Column("in_trial", sa.Boolean, nullable=False),
    sa.Column("price_amount", sa.Float, nullable=True),
    sa.Column("price_currency", sa.String(3), nullable=True),
    sa.Column("priced_day", sa.String(10), nullable=True),
    sa.Column("period", sa.String(32), nullable=True),
    sa.Column("product_id", sa.String(200), nullable=True),
    sa.Column("subscriptions", sa.Integer, nullable=False),
)
