"""Paywall experiments (issue 35): `experiments`, `experiment_versions`, `experiment_exposures`,
`experiment_results`.

The upgrade turns each paywall whose live document has `experiment_active` true (and at least two
variants) into an equivalent running experiment: the document's variants and weights, no holdout,
no audience, and no salt, so the gateway keeps bucketing its users by (app, paywall, user) as the
document did and nobody moves. The downgrade drops the three tables (the documents are untouched
by the upgrade, so they answer as before).

Revision ID: 0215
Revises: 0210
Create Date: 2026-11-29
"""

import secrets
from base64 import b32encode
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0215"
down_revision = "0210"
branch_labels = None
depends_on = None

MIGRATED_BY = "migration 0215"


def _id() -> str:
    return "exp_" + b32encode(secrets.token_bytes(16)).decode("ascii").rstrip("=").lower()


def upgrade() -> None:
    experiments = op.create_table(
        "experiments",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("workspace_id", sa.String(length=40), nullable=False),
        sa.Column("app_id", sa.String(length=40), nullable=False),
        sa.Column("paywall_id", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("variants", sa.JSON(), nullable=False),
        sa.Column("holdout_pct", sa.Float(), nullable=False),
        sa.Column("primary_metric", sa.String(length=32), nullable=False),
        sa.Column("audience", sa.JSON(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("salt", sa.String(length=64), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("stopped_at", sa.DateTime(), nullable=True),
        sa.Column("shipped_variant_id", sa.String(length=100), nullable=True),
        sa.CheckConstraint("status IN ('draft', 'running', 'stopped')", name=op.f("ck_experiments_status")),
        sa.CheckConstraint(
            "primary_metric IN ('trial_start_rate', 'paid_conversion_rate', 'revenue_per_user_d14')",
            name=op.f("ck_experiments_primary_metric"),
        ),
        sa.CheckConstraint("version >= 1", name=op.f("ck_experiments_version")),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"], name=op.f("fk_experiments_app_id_apps")),
        sa.ForeignKeyConstraint(
            ["workspace_id"], ["workspaces.id"], name=op.f("fk_experiments_workspace_id_workspaces")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
    )
    op.create_index("ix_experiments_paywall", "experiments", ["app_id", "paywall_id", "status"])
    op.create_index("ix_experiments_workspace", "experiments", ["workspace_id"])
    versions = op.create_table(
        "experiment_versions",
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("variants", sa.JSON(), nullable=False),
        sa.Column("holdout_pct", sa.Float(), nullable=False),
        sa.Column("effective_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"], ["experiments.id"], name=op.f("fk_experiment_versions_experiment_id_experiments")
        ),
        sa.PrimaryKeyConstraint("experiment_id", "version", name=op.f("pk_experiment_versions")),
    )
    op.create_table(
        "experiment_exposures",
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("user_id", sa.String(length=200), nullable=False),
        sa.Column("variant_id", sa.String(length=100), nullable=False),
        sa.Column("experiment_version", sa.Integer(), nullable=False),
        sa.Column("exposed_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"], ["experiments.id"], name=op.f("fk_experiment_exposures_experiment_id_experiments")
        ),
        sa.PrimaryKeyConstraint("experiment_id", "user_id", name=op.f("pk_experiment_exposures")),
    )
    op.create_table(
        "experiment_results",
        sa.Column("experiment_id", sa.String(length=40), nullable=False),
        sa.Column("as_of", sa.DateTime(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("srm_flagged", sa.Boolean(), nullable=False),
        sa.Column("srm_announced_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"], ["experiments.id"], name=op.f("fk_experiment_results_experiment_id_experiments")
        ),
        sa.PrimaryKeyConstraint("experiment_id", name=op.f("pk_experiment_results")),
    )
    _migrate_active_documents(experiments, versions)


def _migrate_active_documents(experiments: sa.Table, versions: sa.Table) -> None:
    conn = op.get_bind()
    configs = sa.table(
        "paywall_configs",
        sa.column("app_id", sa.String),
        sa.column("paywall_id", sa.String),
        sa.column("version", sa.Integer),
        sa.column("workspace_id", sa.String),
        sa.column("document", sa.JSON),
        sa.column("published_at", sa.DateTime),
    )
    latest = (
        sa.select(configs.c.app_id, configs.c.paywall_id, sa.func.max(configs.c.version).label("version"))
        .group_by(configs.c.app_id, configs.c.paywall_id)
        .subquery()
    )
    rows = conn.execute(
        sa.select(configs).join(
            latest,
            sa.and_(
                configs.c.app_id == latest.c.app_id,
                configs.c.paywall_id == latest.c.paywall_id,
                configs.c.version == latest.c.version,
            ),
        )
    ).all()
    now = datetime.now(UTC).replace(tzinfo=None)
    for row in rows:
        document: dict[str, Any] = row.document
        variants = [
            {"variant_id": v["variant_id"], "weight": float(v.get("traffic_weight", 0))}
            for v in document.get("variants", [])
        ]
        if not document.get("experiment_active") or len(variants) < 2:
            continue  # a single variant is everyone's: nothing to test, the answer is the same
        experiment_id = _id()
        conn.execute(
            experiments.insert().values(
                id=experiment_id, workspace_id=row.workspace_id, app_id=row.app_id, paywall_id=row.paywall_id,
                name=f"{row.paywall_id} (experiment_active of version {row.version})", status="running",
                variants=variants, holdout_pct=0.0, primary_metric="paid_conversion_rate", audience=None,
                priority=0, salt=None, version=1, created_by=MIGRATED_BY, created_at=now, updated_at=now,
                started_at=row.published_at, stopped_at=None, shipped_variant_id=None,
            )
        )  # fmt: skip
        conn.execute(
            versions.insert().values(
                experiment_id=experiment_id, version=1, variants=variants, holdout_pct=0.0,
                effective_at=row.published_at,
            )
        )  # fmt: skip


def downgrade() -> None:
    op.drop_table("experiment_results")
    op.drop_table("experiment_exposures")
    op.drop_table("experiment_versions")
    op.drop_index("ix_experiments_workspace", table_name="experiments")
    op.drop_index("ix_experiments_paywall", table_name="experiments")
    op.drop_table("experiments")
