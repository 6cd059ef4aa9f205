"""Actions engine: typed parameters, fingerprints, rollback rules, evaluations, executions, policies.

`actions` gains `parameters` (the typed subject), `fingerprint` with a partial unique index over
the open statuses (at most one open action per fingerprint, on both databases), `rollback_rules`
(the machine-checkable form of `rollback_conditions`), `origin`, `effective_at` and
`completed_at`. `action_transitions.trigger` accepts the second wave's `expire` (the engine:
signal faded) and `abandon` (the executor gave up). New tables: `action_evaluations`,
`action_executions`, `action_policies` (docs/actions-engine.md, "Tables").

Existing rows: `rollback_rules` is the empty list (their `rollback_conditions` were written as
text; no rule the monitor could check stands behind them); `origin` is `demo` for the demo
seed's actions (created by "flokit demo") and `api` for every other (before the engine, an
action came from the demo or a client). The downgrade drops what was added; a transition fired
by `expire` or `abandon` keeps its row, relabelled `reject` (the one trigger the older
vocabulary has that ends in `rejected`), so no history is lost.

Revision ID: 0130
Revises: 0120
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0130"
down_revision = "0120"
branch_labels = None
depends_on = None

# The vocabularies as of this revision (frozen here: a later change needs its own migration).
_TRIGGERS_BEFORE = "'create', 'guardrails_passed', 'approve', 'reject', 'start', 'complete', 'rollback'"
_TRIGGERS = _TRIGGERS_BEFORE + ", 'expire', 'abandon'"
_ORIGINS = "'engine', 'api', 'demo'"
_OPEN = "status IN ('draft', 'ready', 'approved', 'running')"
_EVALUATION_KINDS = "'proposal', 'revalidation', 'create', 'preflight', 'monitor'"
_OUTCOMES = "'proposed', 'passed', 'failed', 'faded', 'pending', 'inconclusive', 'ok', 'breach', 'refused'"
_EXECUTION_KINDS = "'apply', 'revert'"
_EXECUTION_STATES = "'intent', 'sent', 'verified', 'failed', 'conflict', 'compensated'"
_EXECUTION_FIELDS = "'daily_budget', 'status', 'paywall_config'"
DEMO_ACTOR = "flokit demo"


def upgrade() -> None:
    op.add_column("actions", sa.Column("parameters", sa.JSON(), nullable=True))
    op.add_column("actions", sa.Column("fingerprint", sa.String(length=64), nullable=True))
    op.add_column("actions", sa.Column("rollback_rules", sa.JSON(), nullable=True))
    op.add_column("actions", sa.Column("origin", sa.String(length=16), nullable=True))
    op.add_column("actions", sa.Column("effective_at", sa.DateTime(), nullable=True))
    op.add_column("actions", sa.Column("completed_at", sa.DateTime(), nullable=True))
    actions = sa.table(
        "actions", sa.column("created_by", sa.String), sa.column("origin", sa.String),
        sa.column("rollback_rules", sa.JSON),
    )  # fmt: skip
    op.execute(actions.update().values(rollback_rules=[]))
    op.execute(
        actions.update().values(
            origin=sa.case((actions.c.created_by == DEMO_ACTOR, sa.literal("demo")), else_=sa.literal("api"))
        )
    )
    # SQLite: one table copy (batch) for the NOT NULLs and the CHECK; PostgreSQL: ALTERs.
    with op.batch_alter_table("actions") as batch:
        batch.alter_column("rollback_rules", existing_type=sa.JSON(), nullable=False)
        batch.alter_column("origin", existing_type=sa.String(length=16), nullable=False)
        batch.create_check_constraint(op.f("ck_actions_origin"), f"origin IN ({_ORIGINS})")
    op.create_index(
        "uq_actions_workspace_open_fingerprint",
        "actions",
        ["workspace_id", "fingerprint"],
        unique=True,
        sqlite_where=sa.text(_OPEN),
        postgresql_where=sa.text(_OPEN),
    )
    with op.batch_alter_table("action_transitions") as batch:
        batch.drop_constraint(op.f("ck_action_transitions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_action_transitions_trigger"), f"trigger IN ({_TRIGGERS})")

    op.create_table(
        "action_evaluations",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("engine_version", sa.String(length=32), nullable=True),
        sa.Column("data_as_of", sa.DateTime(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(f"kind IN ({_EVALUATION_KINDS})", name=op.f("ck_action_evaluations_kind")),
        sa.CheckConstraint(f"outcome IN ({_OUTCOMES})", name=op.f("ck_action_evaluations_outcome")),
        sa.ForeignKeyConstraint(["action_id"], ["actions.id"], name=op.f("fk_action_evaluations_action_id_actions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_action_evaluations")),
    )
    op.create_index("ix_action_evaluations_action", "action_evaluations", ["action_id", "id"])
    op.create_table(
        "action_executions",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("action_id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("ad_account_id", sa.String(length=40), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("leg", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=32), nullable=False),
        sa.Column("object_type", sa.String(length=32), nullable=False),
        sa.Column("object_id", sa.String(length=200), nullable=False),
        sa.Column("field", sa.String(length=32), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_request", sa.JSON(), nullable=True),
        sa.Column("last_response_code", sa.Integer(), nullable=True),
        sa.Column("last_response", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.CheckConstraint(f"kind IN ({_EXECUTION_KINDS})", name=op.f("ck_action_executions_kind")),
        sa.CheckConstraint(f"state IN ({_EXECUTION_STATES})", name=op.f("ck_action_executions_state")),
        sa.CheckConstraint(f"field IN ({_EXECUTION_FIELDS})", name=op.f("ck_action_executions_field")),
        sa.CheckConstraint("leg >= 1", name=op.f("ck_action_executions_leg")),
        sa.ForeignKeyConstraint(["action_id"], ["actions.id"], name=op.f("fk_action_executions_action_id_actions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_action_executions")),
        sa.UniqueConstraint("action_id", "kind", "leg", name=op.f("uq_action_executions_action_id_kind_leg")),
    )
    op.create_index("ix_action_executions_state", "action_executions", ["state"])
    op.create_table(
        "action_policies",
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("target_payback_days", sa.Integer(), nullable=False),
        sa.Column("p_decision", sa.Float(), nullable=False),
        sa.Column("max_leg_change", sa.Float(), nullable=False),
        sa.Column("max_portfolio_change", sa.Float(), nullable=False),
        sa.Column("cooldown_days", sa.Integer(), nullable=False),
        sa.Column("suppress_after_reject_days", sa.Integer(), nullable=False),
        sa.Column("max_new_actions_per_refresh", sa.Integer(), nullable=False),
        sa.Column("observation_days", sa.Integer(), nullable=False),
        sa.Column("auto_rollback", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("updated_by", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_action_policies_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("workspace_id", name=op.f("pk_action_policies")),
    )


def downgrade() -> None:
    op.drop_table("action_policies")
    op.drop_index("ix_action_executions_state", table_name="action_executions")
    op.drop_table("action_executions")
    op.drop_index("ix_action_evaluations_action", table_name="action_evaluations")
    op.drop_table("action_evaluations")
    transitions = sa.table("action_transitions", sa.column("trigger", sa.String))
    op.execute(transitions.update().where(transitions.c.trigger.in_(["expire", "abandon"])).values(trigger="reject"))
    with op.batch_alter_table("action_transitions") as batch:
        batch.drop_constraint(op.f("ck_action_transitions_trigger"), type_="check")
        batch.create_check_constraint(op.f("ck_action_transitions_trigger"), f"trigger IN ({_TRIGGERS_BEFORE})")
    op.drop_index("uq_actions_workspace_open_fingerprint", table_name="actions")
    with op.batch_alter_table("actions") as batch:
        batch.drop_constraint(op.f("ck_actions_origin"), type_="check")
        for column in ("completed_at", "effective_at", "origin", "rollback_rules", "fingerprint", "parameters"):
            batch.drop_column(column)
