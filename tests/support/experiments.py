"""Experiments as the dashboard tests plant them: created and started through the repository, their
results computed by the asset's own code (`experiment_results`, then `results.store`) from
exposures and billing facts built here, never hand-written result JSON."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from tests.support.paywalls import offer
from transforms import paywall
from transforms.experiments.assignment import Weighted
from transforms.experiments.results import BILLING_COLUMNS, EXPOSURE_SCHEMA, experiment_results
from warehouse.db import Database
from warehouse.experiments import repository as repo
from warehouse.experiments import results as store
from warehouse.paywalls import configs

PAYWALL = "onboarding"


def publish(db: Database, app_id: str, variant_ids: Sequence[str] = ("control", "annual"), actor: str = "cli") -> int:
    """A paywall whose variants an experiment can split (no `experiment_active`: everyone sees the first)."""
    raw = {
        "experiment_active": False,
        "variants": [
            {"variant_id": v, "layout": "standard", "offers": [offer()], "traffic_weight": 1} for v in variant_ids
        ],
    }
    with db.write() as conn:
        return configs.publish(
            conn, app_id=app_id, paywall_id=PAYWALL, document=paywall.parse_document(raw), actor=actor
        ).version


def create(
    db: Database,
    workspace: Mapping[str, Any],
    name: str,
    *,
    variants: Sequence[tuple[str, float]] = (("control", 1), ("annual", 1)),
    metric: str = "paid_conversion_rate",
    audience: dict[str, Any] | None = None,
    priority: int = 0,
    start: bool = False,
) -> repo.Experiment:
    with db.write() as conn:
        x = repo.create(
            conn, workspace_id=workspace["workspace_id"], app_id=workspace["app_id"], paywall_id=PAYWALL, name=name,
            variants=[Weighted(v, w) for v, w in variants], holdout_pct=0.0, primary_metric=metric,  # type: ignore[arg-type]
            audience=audience, priority=priority, actor="key_test",
        )  # fmt: skip
        if start:
            x = repo.transition(conn, workspace["workspace_id"], x.id, "start", actor="key_test")
    return x


def plant_results(
    db: Database,
    workspace: Mapping[str, Any],
    experiment_id: str,
    cells: Mapping[str, tuple[int, int]],
    *,
    days: int = 20,
    amount: float = 9.99,
) -> datetime:
    """`cells`: variant → (exposed users, paying users). Each user is exposed an hour after the
    start, a payer buys a subscription two hours later (so trials start and paid conversions are
    equal), and the results are computed as of `days` after the start (D7 and D14 matured at 20)
    and stored as the asset stores them. Returns the as-of."""
    with db.read() as conn:
        (analysed,) = [a for a in store.analysed(conn) if a.experiment.id == experiment_id]
    started = analysed.definition.started_at
    exposed_at = started + timedelta(hours=1)
    exposures, billing = [], []
    for variant, (n, paying) in cells.items():
        for i in range(n):
            user = f"{variant}-{i}"
            exposures.append(
                {
                    "experiment_id": experiment_id,
                    "app_id": workspace["app_id"],
                    "user_id": user,
                    "variant_id": variant,
                    "experiment_version": 1,
                    "exposed_at": exposed_at,
                }
            )
            if i < paying:
                billing.append({"user_id": user, "event_type": "trial_start", "occurred_at": exposed_at, "amount": 0.0})
                billing.append(
                    {
                        "user_id": user,
                        "event_type": "subscription_start",
                        "occurred_at": exposed_at + timedelta(hours=2),
                        "amount": amount,
                    }
                )
    as_of = started + timedelta(days=days)
    (result,) = experiment_results(
        [analysed.definition],
        pl.LazyFrame(exposures, schema=EXPOSURE_SCHEMA),
        pl.LazyFrame(billing, schema=BILLING_COLUMNS),
        as_of,
        draws=20_000,
    )
    with db.write() as conn:
        store.store(conn, repo.get(conn, workspace["workspace_id"], experiment_id), result)
    return as_of
