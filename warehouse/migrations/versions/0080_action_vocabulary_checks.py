"""Actions: CHECK the status and trigger columns that had none.

`actions.status` and `actions.type` were checked since 0020; `actions.previous_status` and
`action_transitions.from_status`, `to_status` and `trigger` hold the same vocabularies
(`transforms.actions`) unchecked. The values are spelled out as they are today: a migration is
frozen in time, and the table module builds the same text from the vocabulary (the drift test
compares the two). Names are final (`op.f`), see 0070.

On SQLite each table is recreated (batch mode); `warehouse.migrate` runs migrations there with
foreign keys unenforced and checked before the commit, since `action_transitions` refers to
`actions`.

Revision ID: 0080
Revises: 0070
Create Date: 2026-11-24
"""

from alembic import op

revision = "0080"
down_revision = "0070"
branch_labels = None
depends_on = None

_STATUSES = "'draft', 'ready', 'approved', 'running', 'completed', 'rejected', 'rolled_back'"
_TRIGGERS = "'create', 'guardrails_passed', 'approve', 'reject', 'start', 'complete', 'rollback'"


def upgrade() -> None:
    with op.batch_alter_table("actions") as batch:
        batch.create_check_constraint(op.f("ck_actions_previous_status"), f"previous_status IN ({_STATUSES})")
    with op.batch_alter_table("action_transitions") as batch:
        batch.create_check_constraint(op.f("ck_action_transitions_trigger"), f"trigger IN ({_TRIGGERS})")
        batch.create_check_constraint(op.f("ck_action_transitions_from_status"), f"from_status IN ({_STATUSES})")
        batch.create_check_constraint(op.f("ck_action_transitions_to_status"), f"to_status IN ({_STATUSES})")


def downgrade() -> None:
    with op.batch_alter_table("action_transitions") as batch:
        batch.drop_constraint(op.f("ck_action_transitions_to_status"), type_="check")
        batch.drop_constraint(op.f("ck_action_transitions_from_status"), type_="check")
        batch.drop_constraint(op.f("ck_action_transitions_trigger"), type_="check")
    with op.batch_alter_table("actions") as batch:
        batch.drop_constraint(op.f("ck_actions_previous_status"), type_="check")
