"""Tables of growth actions and their transition history.

The detail (data signals, guardrail checks, rollback conditions, expected impact) is stored as
JSON columns of the action row: it is produced once with the action, never changed, always read
whole with it and never queried element by element, so child tables would only add joins.

`action_transitions` is the action's audit trail, one row per status change (who, when, note or
reason, which key), rather than the generic `audit_log`: typed from/to columns and a foreign key
make an action's history one indexed query, and the detail endpoint shows it as is.
"""

from __future__ import annotations

from typing import get_args

import sqlalchemy as sa

from transforms.actions import ACTION_TYPES, STATUSES, Trigger
from warehouse.db import UTCDateTime
from warehouse.tables import BigIntKey, IdString, metadata, one_of

TRIGGERS: tuple[str, ...] = get_args(Trigger)

actions = sa.Table(
    "actions",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    # The status before the last transition, set in the same UPDATE (`previous_status = status`),
    # so the one statement that moves an action also tells which status it came from.
    sa.Column("previous_status", sa.String(16), nullable=True),
    sa.Column("title", sa.String(300), nullable=False),
    sa.Column("rationale", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("expected_impact", sa.JSON, nullable=False),
    sa.Column("data_signals", sa.JSON, nullable=False),
    sa.Column("guardrail_checks", sa.JSON, nullable=False),
    sa.Column("rollback_conditions", sa.JSON, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("approved_at", UTCDateTime(), nullable=True),
    sa.Column("approved_by", sa.String(200), nullable=True),
    sa.Column("rejected_at", UTCDateTime(), nullable=True),
    sa.Column("rejected_by", sa.String(200), nullable=True),
    sa.Column("rolled_back_at", UTCDateTime(), nullable=True),
    # The vocabularies are `transforms.actions`'s: changing one needs a migration that rewrites
    # these CHECKs (tests/warehouse/test_schema_drift.py fails until there is one). NULL passes.
    sa.CheckConstraint(one_of("status", STATUSES), name="status"),
    sa.CheckConstraint(one_of("previous_status", STATUSES), name="previous_status"),
    sa.CheckConstraint(one_of("type", ACTION_TYPES), name="type"),
    # The list endpoint's orders: newest first then id, optionally within one status.
    sa.Index("ix_actions_workspace_created", "workspace_id", "created_at", "id"),
    sa.Index("ix_actions_workspace_status_created", "workspace_id", "status", "created_at", "id"),
)

action_transitions = sa.Table(
    "action_transitions",
    metadata,
    sa.Column("id", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("action_id", IdString, sa.ForeignKey("actions.id"), nullable=False),
    sa.Column("workspace_id", IdString, nullable=False),
    sa.Column("trigger", sa.String(32), nullable=False),
    sa.Column("from_status", sa.String(16), nullable=True),  # null for the creation row
    sa.Column("to_status", sa.String(16), nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("key_id", IdString, nullable=True),  # the API key that made the call, if any
    sa.Column("note", sa.Text, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("trigger", TRIGGERS), name="trigger"),
    sa.CheckConstraint(one_of("from_status", STATUSES), name="from_status"),
    sa.CheckConstraint(one_of("to_status", STATUSES), name="to_status"),
    sa.Index("ix_action_transitions_action", "action_id", "id"),
)
