"""A running growth action and a lake planted around its change: what the monitor's tests share
(tests/orchestration/test_action_monitor.py, the webhook parity test)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

from transforms.actions import ActionContent
from transforms.actions.rules import RollbackRule
from transforms.reports.schemas import ACTION_SIGNAL_SCHEMA, CLEAN_SPEND_SCHEMA
from warehouse.actions import repository
from warehouse.db import Database
from warehouse.lake import Lake
from warehouse.reports import report_lake

CAMPAIGN = "meta_broad"
CPI_RULE = RollbackRule(
    id="rb_cpi", metric="cpi", scope_entity="campaign", scope_name=CAMPAIGN, comparator="gt",
    threshold_kind="relative_to_baseline", threshold_value=1.3, baseline_window_days=14, window_max_days=14,
    min_sample_unit="installs", min_sample_value=150, grace_hours=24, test="confidence_sequence", alpha=0.1,
    n_star=1500, on_breach="rollback",
)  # fmt: skip
TRIAL_RULE = RollbackRule(
    id="rb_trials", metric="trial_rate", scope_entity="campaign", scope_name=CAMPAIGN, comparator="lt",
    threshold_kind="relative_to_baseline", threshold_value=0.8, baseline_window_days=14, window_max_days=14,
    min_sample_unit="installs", min_sample_value=150, grace_hours=24, test="confidence_sequence", alpha=0.1,
    n_star=1500, on_breach="rollback",
)  # fmt: skip


def signal_row(day: date, through: date, **values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {name: 0 for name in ACTION_SIGNAL_SCHEMA}
    out |= {"cohort_date": day, "campaign": CAMPAIGN, "creative": "c1", "country": "US", "offer": "monthly"}
    out |= {"paywall": "main", "spend": 0.0, **values}
    for name in ACTION_SIGNAL_SCHEMA:
        if name.startswith("net_rev"):
            out[name] = float(out[name])
    out["complete_days"] = max(0, min(30, (through - day).days))
    return out


def plant(
    lake: Lake,
    workspace_id: str,
    effective: datetime,
    today: date,
    before: dict[str, Any],
    after: dict[str, Any],
    with_spend: bool = True,
) -> None:
    """Signals and spend: `before` per cohort day over the 14 days before the change's day, `after`
    per day since (through today), and the change's own day with what came before."""
    first = effective.date() - timedelta(days=14)
    days = [first + timedelta(days=k) for k in range((today - first).days + 1)]
    rows = [
        {**signal_row(d, today, **(before if d <= effective.date() else after)), "workspace_id": workspace_id}
        for d in days
    ]
    report_lake.write_days(
        lake, report_lake.ACTION_SIGNALS, days, pl.DataFrame(rows, schema=ACTION_SIGNAL_SCHEMA), pl.col("cohort_date")
    )
    if not with_spend:
        return
    spend = pl.DataFrame(
        [{"workspace_id": workspace_id, "spend_date": r["cohort_date"], "campaign": CAMPAIGN, "creative": "c1",
          "country": "US", "spend": r["spend"], "amount": r["spend"], "currency": "USD", "money_issue": None}
         for r in rows],
        schema=CLEAN_SPEND_SCHEMA,
    )  # fmt: skip
    report_lake.write_days(lake, report_lake.SPEND, days, spend, pl.col("spend_date"))


def running_action(
    db: Database,
    workspace_id: str,
    effective: datetime,
    rules: list[RollbackRule],
    action_type: str = "budget_shift",
    parameters: dict[str, Any] | None = None,
) -> str:
    content = ActionContent(
        title="Shift budget to meta_broad",
        rationale="planted",
        expected_impact={"metric": "roas_30d", "direction": "increase", "magnitude": 0.01},
        guardrail_checks=[{"id": "minimum_cohort_size", "passed": True, "detail": "planted"}],
    )
    params = parameters or {"from_campaign": "other", "to_campaign": CAMPAIGN, "amount_per_day": 50, "currency": "USD"}
    with db.write() as conn:
        action = repository.create_action(
            conn, workspace_id=workspace_id, action_type=action_type, content=content, actor="test", origin="engine",
            parameters=params, rollback_rules=rules, at=effective - timedelta(days=1),
        )  # fmt: skip
        repository.transition(conn, workspace_id=workspace_id, action_id=action.id, trigger="approve", actor="maya")
        repository.transition(
            conn, workspace_id=workspace_id, action_id=action.id, trigger="start", actor="flokit executor",
            effective_at=effective,
        )  # fmt: skip
    return action.id


def times() -> tuple[datetime, date]:
    today = datetime.now(UTC).date()
    return datetime.combine(today - timedelta(days=8), datetime.min.time(), UTC) + timedelta(hours=12), today
