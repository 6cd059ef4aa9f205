"""CHECK constraints get the names the tables declare (`ck_<table>_<name>`), not doubled ones.

Alembic applies `metadata`'s naming convention (`ck_%(table_name)s_%(constraint_name)s`) to the
name a migration gives a CHECK unless the name is marked final with `op.f()`. 0001-0040 passed
full names unmarked, so the databases hold `ck_api_keys_ck_api_keys_scope` where `metadata`
says `ck_api_keys_scope`. Alembic's autogenerate does not compare CHECK constraints, so nothing
noticed; tests/warehouse/test_schema_drift.py now does. Later migrations name CHECKs with `op.f`.

PostgreSQL renames each constraint in place. SQLite cannot, so each table is recreated with the
constraint under its new name (batch mode; `warehouse.migrate` runs it with foreign keys checked
once before the commit, since other tables refer to `actions` and `webhook_endpoints`).

Revision ID: 0070
Revises: 0060
Create Date: 2026-11-24
"""

from alembic import op

revision = "0070"
down_revision = "0060"
branch_labels = None
depends_on = None

_STATUSES = "'draft', 'ready', 'approved', 'running', 'completed', 'rejected', 'rolled_back'"

# table -> [(short name, condition)], as 0001-0040 created them.
_CHECKS: dict[str, list[tuple[str, str]]] = {
    "api_keys": [("scope", "scope IN ('read_only', 'read_write')")],
    "actions": [
        ("status", f"status IN ({_STATUSES})"),
        ("type", "type IN ('budget_shift', 'creative_pause', 'offer_test')"),
    ],
    "webhook_endpoints": [("status", "status IN ('enabled', 'disabled')")],
    "webhook_secrets": [("status", "status IN ('active', 'retiring')")],
    "webhook_deliveries": [("status", "status IN ('pending', 'delivering', 'succeeded', 'failed')")],
    "paywall_configs": [("version", "version >= 1")],
}


def _doubled(table: str, short: str) -> str:
    return f"ck_{table}_ck_{table}_{short}"


def _meant(table: str, short: str) -> str:
    return f"ck_{table}_{short}"


def _rename(rename: dict[str, list[tuple[str, str, str]]]) -> None:
    """Rename CHECK constraints: table -> [(old name, new name, condition)]."""
    if op.get_bind().dialect.name == "postgresql":
        for table, checks in rename.items():
            for old, new, _condition in checks:
                op.execute(f"ALTER TABLE {table} RENAME CONSTRAINT {old} TO {new}")
        return
    for table, checks in rename.items():
        with op.batch_alter_table(table) as batch:
            for old, new, condition in checks:
                batch.drop_constraint(op.f(old), type_="check")
                batch.create_check_constraint(op.f(new), condition)


def upgrade() -> None:
    _rename(
        {
            table: [(_doubled(table, short), _meant(table, short), condition) for short, condition in checks]
            for table, checks in _CHECKS.items()
        }
    )


def downgrade() -> None:
    _rename(
        {
            table: [(_meant(table, short), _doubled(table, short), condition) for short, condition in checks]
            for table, checks in _CHECKS.items()
        }
    )
