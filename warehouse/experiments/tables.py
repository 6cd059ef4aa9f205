"""Experiments and their exposures.

- `experiments`: one row per experiment of an app's paywall, its status and current definition;
  `version` counts the changes of the split (variants, weights, holdout).
- `experiment_versions`: each version's split, kept so the sample-ratio check expects what was
  in force at each exposure.
- `experiment_exposures`: a user's first exposure to an experiment, which wins for the
  experiment's life (primary key: one per user and experiment; the first writer wins).
- `experiment_results`: each experiment's results as the last refresh computed them (the
  `experiment_results` asset), and when its sample-ratio alarm was announced (once).
"""

from __future__ import annotations

import sqlalchemy as sa

from warehouse.db import UTCDateTime
from warehouse.tables import IdString, metadata, one_of

STATUSES = ("draft", "running", "stopped")
METRICS = ("trial_start_rate", "paid_conversion_rate", "revenue_per_user_d14")

experiments = sa.Table(
    "experiments",
    metadata,
    sa.Column("id", IdString, primary_key=True),
    sa.Column("workspace_id", IdString, sa.ForeignKey("workspaces.id"), nullable=False),
    sa.Column("app_id", IdString, sa.ForeignKey("apps.id"), nullable=False),
    sa.Column("paywall_id", sa.String(100), nullable=False),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("variants", sa.JSON, nullable=False),  # [{variant_id, weight}], the first is the control
    sa.Column("holdout_pct", sa.Float, nullable=False),
    sa.Column("primary_metric", sa.String(32), nullable=False),
    sa.Column("audience", sa.JSON, nullable=True),  # transforms.experiments.audience.Audience; NULL: everyone
    sa.Column("priority", sa.Integer, nullable=False),
    # Hex of 16 random bytes; NULL for an experiment migrated from an `experiment_active` document,
    # which keeps that document's per-paywall buckets (transforms.paywall.bucket) so nobody moves.
    sa.Column("salt", sa.String(64), nullable=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("created_by", sa.String(200), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("stopped_at", UTCDateTime(), nullable=True),
    sa.Column("shipped_variant_id", sa.String(100), nullable=True),
    sa.Index("ix_experiments_paywall", "app_id", "paywall_id", "status"),
    sa.Index("ix_experiments_workspace", "workspace_id"),
    sa.CheckConstraint(one_of("status", STATUSES), name="status"),
    sa.CheckConstraint(one_of("primary_metric", METRICS), name="primary_metric"),
    sa.CheckConstraint("version >= 1", name="version"),
)

experiment_versions = sa.Table(
    "experiment_versions",
    metadata,
    sa.Column("experiment_id", IdString, sa.ForeignKey("experiments.id"), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True),
    sa.Column("variants", sa.JSON, nullable=False),
    sa.Column("holdout_pct", sa.Float, nullable=False),
    sa.Column("effective_at", UTCDateTime(), nullable=False),
)

experiment_exposures = sa.Table(
    "experiment_exposures",
    metadata,
    sa.Column("experiment_id", IdString, sa.ForeignKey("experiments.id"), primary_key=True),
    sa.Column("user_id", sa.String(200), primary_key=True),
    sa.Column("variant_id", sa.String(100), nullable=False),  # `holdout` for the holdout
    sa.Column("experiment_version", sa.Integer, nullable=False),
    sa.Column("exposed_at", UTCDateTime(), nullable=False),
)

experiment_results = sa.Table(
    "experiment_results",
    metadata,
    sa.Column("experiment_id", IdString, sa.ForeignKey("experiments.id"), primary_key=True),
    sa.Column("as_of", UTCDateTime(), nullable=False),  # the data's time: events up to it are counted
    sa.Column("results", sa.JSON, nullable=False),  # the API's `results` object
    sa.Column("srm_flagged", sa.Boolean, nullable=False),
    sa.Column("srm_announced_at", UTCDateTime(), nullable=True),  # experiment.srm_detected sent (once)
)
