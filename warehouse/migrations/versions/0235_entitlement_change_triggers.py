"""Every write to the entitlement ledger notifies the API workers' read caches, whoever makes it.

Until now the application sent `pg_notify('flokit_entitlements', '<app>:<user>')` beside each
ledger write it made, so a write made any other way (an operator's SQL, a restore of one table, a
tool) reached no worker's cache, and cached rows expired after 60 s to bound that. The triggers
below send the same notification from the database itself, in the writing transaction (delivered
at its commit, collapsed per distinct payload by PostgreSQL), for every row inserted, updated or
deleted, for an app whose key is changed or revoked (`'<app>:*'`) and for a TRUNCATE (`':*'`: every
cached row goes). The application no longer sends its own, and cached rows no longer need to
expire within a minute (docs/benchmarks.md: that expiry made the read's cost depend on how fast
the host serves).

SQLite needs nothing: its readers notice any commit by `PRAGMA data_version`.

Revision ID: 0235
Revises: 0230
Create Date: 2026-11-29
"""

from alembic import op

revision = "0235"
down_revision = "0230"
branch_labels = None
depends_on = None

CHANNEL = "flokit_entitlements"  # warehouse.entitlements.cache.CHANNEL at the time of writing

UPGRADE = [
    f"""
    CREATE FUNCTION flokit_entitlement_grant_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.user_id IS NOT NULL THEN
            PERFORM pg_notify('{CHANNEL}', OLD.app_id || ':' || OLD.user_id);
        END IF;
        IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.user_id IS NOT NULL THEN
            PERFORM pg_notify('{CHANNEL}', NEW.app_id || ':' || NEW.user_id);
        END IF;
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION flokit_entitlement_app_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', OLD.id || ':*');
        RETURN NULL;
    END $$
    """,
    f"""
    CREATE FUNCTION flokit_entitlements_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM pg_notify('{CHANNEL}', ':*');
        RETURN NULL;
    END $$
    """,
    """
    CREATE TRIGGER entitlement_grants_notify AFTER INSERT OR UPDATE OR DELETE ON entitlement_grants
    FOR EACH ROW EXECUTE FUNCTION flokit_entitlement_grant_changed()
    """,
    """
    CREATE TRIGGER entitlement_grants_truncate_notify AFTER TRUNCATE ON entitlement_grants
    FOR EACH STATEMENT EXECUTE FUNCTION flokit_entitlements_truncated()
    """,
    """
    CREATE TRIGGER apps_entitlement_key_notify AFTER UPDATE OF publishable_key, revoked_at OR DELETE ON apps
    FOR EACH ROW EXECUTE FUNCTION flokit_entitlement_app_changed()
    """,
    """
    CREATE TRIGGER apps_truncate_notify AFTER TRUNCATE ON apps
    FOR EACH STATEMENT EXECUTE FUNCTION flokit_entitlements_truncated()
    """,
]

DOWNGRADE = [
    "DROP TRIGGER apps_truncate_notify ON apps",
    "DROP TRIGGER apps_entitlement_key_notify ON apps",
    "DROP TRIGGER entitlement_grants_truncate_notify ON entitlement_grants",
    "DROP TRIGGER entitlement_grants_notify ON entitlement_grants",
    "DROP FUNCTION flokit_entitlements_truncated()",
    "DROP FUNCTION flokit_entitlement_app_changed()",
    "DROP FUNCTION flokit_entitlement_grant_changed()",
]


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in UPGRADE:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for statement in DOWNGRADE:
            op.execute(statement)
