"""Stored provider notifications: the credentials they arrived with, blanked.

Until this revision the processor stored every header and the query string of each verified
notification: RevenueCat's and Adapty's `Authorization` values, Pub/Sub's OIDC token, the Android
push `?token=`. Replay reads none of them (each handler's `decode` reads the body and the
workspace, app and integration columns), so the processor now stores only what replay reads
(`api.processor.framework.kept_for_replay`: no header, no query parameter), and the rows stored
before are reduced to the same: `headers` `{}`, `query_string` empty. The README asks operators
to rotate the values stored before this version.

On SQLite the rows are rewritten with `secure_delete` on, so the old bytes are zeroed in the
file instead of left in free space. The downgrade restores nothing: what was blanked is gone.

Revision ID: 0190
Revises: 0180
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = "0190"
down_revision = "0180"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    sqlite = bind.dialect.name == "sqlite"
    if sqlite:  # a connection setting, allowed inside the migration's transaction
        before = int(bind.exec_driver_sql("PRAGMA secure_delete").scalar_one())
        bind.exec_driver_sql("PRAGMA secure_delete = ON")
    notifications = sa.table("store_notifications", sa.column("headers", sa.JSON), sa.column("query_string", sa.Text))
    op.execute(notifications.update().values(headers={}, query_string=""))
    if sqlite:
        bind.exec_driver_sql(f"PRAGMA secure_delete = {before}")


def downgrade() -> None:
    pass  # the blanked credentials are not restored (nor could they be)
