"""Landing: one index fewer on each table an ingest callback writes.

`landed_events`: one `(in_lake, day)` index replaces `(day)` and the partial `(day) WHERE NOT
in_lake`. `event_claims`: the B-tree on `claimed_at` goes; PostgreSQL gets a BRIN index for the
daily prune instead, SQLite prunes along the rowid (see `warehouse/events/tables.py`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_landed_events_pending", table_name="landed_events")
    op.drop_index("ix_landed_events_day", table_name="landed_events")
    op.create_index("ix_landed_events_lake_day", "landed_events", ["in_lake", "day"])
    op.drop_index("ix_event_claims_claimed_at", table_name="event_claims")
    if op.get_bind().dialect.name == "postgresql":
        op.create_index("ix_event_claims_claimed_at", "event_claims", ["claimed_at"], postgresql_using="brin")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_event_claims_claimed_at", table_name="event_claims")
    op.create_index("ix_event_claims_claimed_at", "event_claims", ["claimed_at"])
    op.drop_index("ix_landed_events_lake_day", table_name="landed_events")
    op.create_index("ix_landed_events_day", "landed_events", ["day"])
    op.create_index(
        "ix_landed_events_pending",
        "landed_events",
        ["day"],
        sqlite_where=sa.text("NOT in_lake"),
        postgresql_where=sa.text("NOT in_lake"),
    )
