"""Checks on the report tables. The ones guarding what the API serves are blocking: a failure
stops `published_reports`, so the API keeps answering from the last good store."""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from dagster import AssetCheckExecutionContext

from orchestration.reports.assets import cohort_curves, payback_cube, published_reports, spend
from orchestration.resources import LakeResource
from transforms.reports import quality
from transforms.reports.schemas import COHORT_CURVE_KEY, PAYBACK_KEY, SPEND_KEY
from warehouse.reports import store

# A cube only grows as days pass; losing more than half its rows at once means lost input.
TOLERATED_ROW_DROP = 0.5
# Spec limits: "report refresh: every 6 hours".
FRESHNESS = timedelta(hours=6)


def _result(failures: int, what: str, **metadata: Any) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=failures == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{failures} {what}" if failures else None,
        metadata={"failures": failures, **metadata},
    )


@dg.asset_check(asset=payback_cube, blocking=True, description="One row per cohort day, dimension, value and day.")
def payback_unique_key(lake: LakeResource) -> dg.AssetCheckResult:
    return _result(quality.duplicate_keys(store.scan_table(lake.lake(), store.PAYBACK), PAYBACK_KEY), "duplicate keys")


@dg.asset_check(asset=payback_cube, blocking=True, description="Spend, revenue and refunds are never negative.")
def payback_non_negative(lake: LakeResource) -> dg.AssetCheckResult:
    frame = store.scan_table(lake.lake(), store.PAYBACK)
    return _result(quality.negative_rows(frame, ("spend", "revenue", "refunds", "cumulative_revenue")), "negative rows")


@dg.asset_check(asset=cohort_curves, blocking=True, description="One row per cohort day, dimension, value and week.")
def cohort_curves_unique_key(lake: LakeResource) -> dg.AssetCheckResult:
    frame = store.scan_table(lake.lake(), store.COHORT_CURVES)
    return _result(quality.duplicate_keys(frame, COHORT_CURVE_KEY), "duplicate keys")


@dg.asset_check(asset=spend, blocking=True, description="All spend days: one row per key, no negative amount.")
def spend_valid(lake: LakeResource) -> dg.AssetCheckResult:
    frame = store.scan_days(lake.lake(), store.SPEND)
    failures = quality.duplicate_keys(frame, SPEND_KEY) + quality.negative_rows(frame, ("spend",))
    return _result(failures, "duplicate or negative spend rows")


def _row_count_check(context: AssetCheckExecutionContext, key: dg.AssetKey) -> dg.AssetCheckResult:
    event = context.instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event else None
    meta = materialization.metadata if materialization else {}
    current = int(meta["dagster/row_count"].value) if "dagster/row_count" in meta else 0
    previous_value = int(meta["previous_row_count"].value) if "previous_row_count" in meta else -1
    previous = None if previous_value < 0 else previous_value
    dropped = quality.row_count_drop(previous, current, TOLERATED_ROW_DROP)
    return dg.AssetCheckResult(
        passed=not dropped,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"rows fell from {previous} to {current}" if dropped else None,
        metadata={"previous_rows": previous if previous is not None else -1, "rows": current},
    )


@dg.asset_check(asset=payback_cube, blocking=True, description="Row count did not collapse since the last run.")
def payback_row_count(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return _row_count_check(context, payback_cube.key)


@dg.asset_check(asset=cohort_curves, blocking=True, description="Row count did not collapse since the last run.")
def cohort_curves_row_count(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return _row_count_check(context, cohort_curves.key)


@dg.asset_check(asset=published_reports, description="The published reports are at most 6 hours old.")
def published_reports_fresh(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    event = context.instance.get_latest_materialization_event(published_reports.key)
    age = datetime.now(UTC) - datetime.fromtimestamp(event.timestamp, UTC) if event else None
    fresh = age is not None and age <= FRESHNESS
    return dg.AssetCheckResult(
        passed=fresh,
        severity=dg.AssetCheckSeverity.WARN,
        description=None if fresh else f"last published {age} ago" if age else "never published",
        metadata={"age_seconds": age.total_seconds() if age else -1.0},
    )


CHECKS = [
    payback_unique_key,
    payback_non_negative,
    payback_row_count,
    cohort_curves_unique_key,
    cohort_curves_row_count,
    spend_valid,
    published_reports_fresh,
]
