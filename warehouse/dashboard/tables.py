"""Tables of the dashboard's sign-in: one-time login links and the sessions they become.

Neither table holds a secret: a link's token and a session's id are stored as their SHA-256
(hex), as API keys are, so a copy of the database signs nobody in. Rows live in the operational
database, not in a worker's memory: the CLI that mints a link and each gunicorn worker that
honours it are different processes.
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata

# An operator is an email address (transforms.dashboard_auth.EMAIL_MAX).
OPERATOR_MAX = 254

dashboard_login_tokens = sa.Table(
    "dashboard_login_tokens",
    metadata,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("operator", sa.String(OPERATOR_MAX), nullable=False),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    # Set by the one UPDATE that consumes the link: a second use finds it set and fails.
    sa.Column("used_at", UTCDateTime(), nullable=True),
)

dashboard_sessions = sa.Table(
    "dashboard_sessions",
    metadata,
    sa.Column("session_hash", sa.String(64), primary_key=True),
    sa.Column("operator", sa.String(OPERATOR_MAX), nullable=False),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("last_seen_at", UTCDateTime(), nullable=False),
    # The absolute end (created_at + 7 days); the idle end is last_seen_at + 12 hours.
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    # "Sign out everywhere" deletes every row of one operator.
    sa.Index("ix_dashboard_sessions_operator", "operator"),
)
