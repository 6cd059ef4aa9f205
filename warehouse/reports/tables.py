"""Tables of the reports' state in the operational database.

- `payback_notified_digests`: per workspace and cohort day, the digest of the published payback
  rows the workspace was last told about by a `report.payback_updated` event. The published
  store carries the live digests (`warehouse.reports.serving`); a cohort day whose live digest
  differs from this one is a change not yet announced. Written in the same transaction as the
  event, so an event is emitted exactly when its digests are recorded: a crash between the
  publish and that transaction leaves the difference in place for the next comparison.
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata

payback_notified_digests = sa.Table(
    "payback_notified_digests",
    metadata,
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("cohort_date", sa.Date, primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),
    sa.Column("notified_at", UTCDateTime(), nullable=False),
)
