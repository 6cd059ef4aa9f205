"""Google Play pushes name their sender; no statement is dated ahead of the clock.

- `app_stores.android_push_service_account`: the e-mail of the service account the app's
  Pub/Sub push subscription signs its OIDC tokens as. Google signs ID tokens for any audience
  for any account, so an audience alone does not say the push came from the subscription: a
  token is now accepted only when its `email` is this one. NULL on existing rows: an app with an
  audience and no service account refuses OIDC pushes until the operator sets it
  (`flokit admin apps stores --android-push-service-account`); push-token URLs are unaffected.
- `entitlement_grants.stated_at` later than five minutes after now (a statement dated ahead of
  the clock, such as a forged void dated 2100) is brought back to now, the bound the ledger
  applies from this revision on: otherwise it would outrank every genuine statement until then.
  The state it stated stays; the next genuine statement replaces it.
The downgrade drops the column (the clamped times stay clamped: they were never true).

Revision ID: 0180
Revises: 0170
Create Date: 2026-11-28
"""

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from alembic import op

revision = "0180"
down_revision = "0170"
branch_labels = None
depends_on = None

STATEMENT_LEAD = timedelta(minutes=5)  # transforms.entitlements.facts.MAX_STATEMENT_LEAD as of this revision


def upgrade() -> None:
    # ADD COLUMN of a nullable column is native on both databases (no table copy on SQLite).
    op.add_column("app_stores", sa.Column("android_push_service_account", sa.String(length=320), nullable=True))
    now = datetime.now(UTC).replace(tzinfo=None)  # stored as naive UTC on both databases
    grants = sa.table("entitlement_grants", sa.column("stated_at", sa.DateTime))
    op.execute(grants.update().where(grants.c.stated_at > now + STATEMENT_LEAD).values(stated_at=now))


def downgrade() -> None:
    # Native on both (SQLite has DROP COLUMN since 3.35, for a column no index or constraint uses).
    op.drop_column("app_stores", "android_push_service_account")
