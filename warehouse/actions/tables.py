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

from transforms.actions import (
    ACTION_TYPES,
    EVALUATION_KINDS,
    EVALUATION_OUTCOMES,
    EXECUTION_FIELDS,
    EXECUTION_KINDS,
    EXECUTION_STATES,
    OPEN_STATUSES,
    ORIGINS,
    STATUSES,
    Trigger,
)
from warehouse.db import UTCDateTime
from warehouse.tables import BigIntKey, IdString, metadata, one_of

TRIGGERS: tuple[str, ...] = get_args(Trigger)
# The partial index's predicate (the open statuses), spelled as the migration spells it.
OPEN_FINGERPRINT_WHERE = one_of("status", OPEN_STATUSES)

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
    # The typed subject (docs/actions-engine.md "Tables"): null for a client's own proposal.
    sa.Column("parameters", sa.JSON, nullable=True),
    # sha256 of (workspace, type, subject, direction): what "the same proposal" means to the engine.
    sa.Column("fingerprint", sa.String(64), nullable=True),
    # The machine-checkable rules (`transforms.actions.rules`); `rollback_conditions` is their rendering.
    sa.Column("rollback_rules", sa.JSON, nullable=False),
    sa.Column("origin", sa.String(16), nullable=False),
    # When the executor's platform change took effect; when the observation window ended.
    sa.Column("effective_at", UTCDateTime(), nullable=True),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    # The vocabularies are `transforms.actions`'s: changing one needs a migration that rewrites
    # these CHECKs (tests/warehouse/test_schema_drift.py fails until there is one). NULL passes.
    sa.CheckConstraint(one_of("status", STATUSES), name="status"),
    sa.CheckConstraint(one_of("previous_status", STATUSES), name="previous_status"),
    sa.CheckConstraint(one_of("type", ACTION_TYPES), name="type"),
    sa.CheckConstraint(one_of("origin", ORIGINS), name="origin"),
    # At most one open action per fingerprint, enforced by the database: two engine runs racing on
    # the same proposal cannot both open it (the loser re-evaluates the winner's action). A NULL
    # fingerprint (a client's or the demo's action) never conflicts.
    sa.Index(
        "uq_actions_workspace_open_fingerprint",
        "workspace_id",
        "fingerprint",
        unique=True,
        sqlite_where=sa.text(OPEN_FINGERPRINT_WHERE),
        postgresql_where=sa.text(OPEN_FINGERPRINT_WHERE),
    ),
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

action_evaluations = sa.Table(
    "action_evaluations",
    metadata,
    # The audit of every decision about an action that is not a transition (a proposal's
    # statistics, a re-evaluation, a preflight, a monitor check): append-only, shown with the
    # transitions in the action's history.
    sa.Column("id", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("action_id", IdString, sa.ForeignKey("actions.id"), nullable=False),
    sa.Column("workspace_id", IdString, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    # Which engine/monitor code decided, and how fresh its inputs were.
    sa.Column("engine_version", sa.String(32), nullable=True),
    sa.Column("data_as_of", UTCDateTime(), nullable=True),
    # The sufficient statistics, the guardrail results, the rule, observed value and bound.
    sa.Column("detail", sa.JSON, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("kind", EVALUATION_KINDS), name="kind"),
    sa.CheckConstraint(one_of("outcome", EVALUATION_OUTCOMES), name="outcome"),
    sa.Index("ix_action_evaluations_action", "action_id", "id"),
)

action_executions = sa.Table(
    "action_executions",
    metadata,
    # The outbox and ledger of platform writes: a row is written (`intent`) before the call, so a
    # crash between the call and its record is visible, and a retry compares before it writes.
    sa.Column("id", BigIntKey, primary_key=True, autoincrement=True),
    sa.Column("action_id", IdString, sa.ForeignKey("actions.id"), nullable=False),
    sa.Column("workspace_id", IdString, nullable=False),
    # The ad account written to (migration 0140 adds the table); null for FloKit's own paywalls.
    sa.Column("ad_account_id", IdString, nullable=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("leg", sa.Integer, nullable=False),  # 1, 2: decreases first
    sa.Column("platform", sa.String(32), nullable=False),
    sa.Column("object_type", sa.String(32), nullable=False),
    sa.Column("object_id", sa.String(200), nullable=False),
    sa.Column("field", sa.String(32), nullable=False),
    # Absolute values (never deltas): a retried absolute write is harmless.
    sa.Column("before", sa.JSON, nullable=True),
    sa.Column("after", sa.JSON, nullable=True),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("last_request", sa.JSON, nullable=True),
    sa.Column("last_response_code", sa.Integer, nullable=True),
    sa.Column("last_response", sa.Text, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.CheckConstraint(one_of("kind", EXECUTION_KINDS), name="kind"),
    sa.CheckConstraint(one_of("state", EXECUTION_STATES), name="state"),
    sa.CheckConstraint(one_of("field", EXECUTION_FIELDS), name="field"),
    sa.CheckConstraint("leg >= 1", name="leg"),
    sa.UniqueConstraint("action_id", "kind", "leg"),
    sa.Index("ix_action_executions_state", "state"),
)

action_policies = sa.Table(
    "action_policies",
    metadata,
    # One row per workspace that changed a threshold; no row = `transforms.actions.policy.DEFAULT`.
    # Values are validated by `Policy` before they are written.
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), primary_key=True),
    sa.Column("target_payback_days", sa.Integer, nullable=False),
    sa.Column("p_decision", sa.Float, nullable=False),
    sa.Column("max_leg_change", sa.Float, nullable=False),
    sa.Column("max_portfolio_change", sa.Float, nullable=False),
    sa.Column("cooldown_days", sa.Integer, nullable=False),
    sa.Column("suppress_after_reject_days", sa.Integer, nullable=False),
    sa.Column("max_new_actions_per_refresh", sa.Integer, nullable=False),
    sa.Column("observation_days", sa.Integer, nullable=False),
    sa.Column("auto_rollback", sa.Boolean, nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("updated_by", sa.String(200), nullable=False),
)
