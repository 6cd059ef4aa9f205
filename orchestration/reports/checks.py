"""Checks on the report tables. The ones guarding what the API serves are blocking: a failure
stops `published_reports`, so the API keeps answering from the last good store.

`published_reports_fresh` runs in every refresh run (where it passes: the store was just
published) and, on its own, when `published_reports_freshness_sensor` sees the store outgrow
its promise (6 hours plus a grace period), where it fails until the next publish.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
from dagster import AssetCheckExecutionContext

from orchestration.reports.assets import cohort_curves, payback, published_reports, spend
from orchestration.resources import DataDirResource
from transforms.reports import quality
from transforms.reports.schemas import COHORT_CURVE_KEY, PAYBACK_KEY, SPEND_KEY
from warehouse.reports import serving, store

# A cube only grows as days pass; losing more than half its rows at once means lost input.
TOLERATED_ROW_DROP = 0.5
# Spec limits: "report refresh: every 6 hours". The grace covers the schedule's tick reaching the
# daemon, the run's start and the refresh itself (seconds incremental, minutes in full).
REFRESH_EVERY = timedelta(hours=6)
GRACE = timedelta(minutes=30)
MAX_AGE = REFRESH_EVERY + GRACE


def _result(failures: int, what: str, **metadata: Any) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=failures == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{failures} {what}" if failures else None,
        metadata={"failures": failures, **metadata},
    )


@dg.asset_check(asset=payback, blocking=True, description="One row per cohort day, dimension, value and day.")
def payback_unique_key(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = store.scan_table(data_dir.paths.lake(), store.PAYBACK)
    return _result(quality.duplicate_keys(frame, PAYBACK_KEY), "duplicate keys")


@dg.asset_check(asset=payback, blocking=True, description="Spend, revenue and refunds are never negative.")
def payback_non_negative(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = store.scan_table(data_dir.paths.lake(), store.PAYBACK)
    return _result(quality.negative_rows(frame, ("spend", "revenue", "refunds", "cumulative_revenue")), "negative rows")


@dg.asset_check(asset=cohort_curves, blocking=True, description="One row per cohort day, dimension, value and week.")
def cohort_curves_unique_key(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = store.scan_table(data_dir.paths.lake(), store.COHORT_CURVES)
    return _result(quality.duplicate_keys(frame, COHORT_CURVE_KEY), "duplicate keys")


@dg.asset_check(asset=spend, blocking=True, description="All spend days: one row per key, no negative amount.")
def spend_valid(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = store.scan_days(data_dir.paths.lake(), store.SPEND)
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


@dg.asset_check(asset=payback, blocking=True, description="Row count did not collapse since the last run.")
def payback_row_count(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return _row_count_check(context, payback.key)


@dg.asset_check(asset=cohort_curves, blocking=True, description="Row count did not collapse since the last run.")
def cohort_curves_row_count(context: AssetCheckExecutionContext) -> dg.AssetCheckResult:
    return _row_count_check(context, cohort_curves.key)


def freshness(generated_at: datetime | None, now: datetime) -> dg.AssetCheckResult:
    """Fresh while the published store is at most `MAX_AGE` old."""
    age = now - generated_at if generated_at else None
    fresh = age is not None and age <= MAX_AGE
    return dg.AssetCheckResult(
        passed=fresh,
        severity=dg.AssetCheckSeverity.WARN,
        description=None if fresh else f"published {age} ago, more than {MAX_AGE}" if age else "never published",
        metadata={
            "age_seconds": age.total_seconds() if age else -1.0,
            "max_age_seconds": MAX_AGE.total_seconds(),
            "generated_at": generated_at.isoformat() if generated_at else "",
        },
    )


@dg.asset_check(
    asset=published_reports,
    description="The published reports (their generated_at) are at most 6 hours old, plus a 30-minute grace.",
)
def published_reports_fresh(data_dir: DataDirResource) -> dg.AssetCheckResult:
    return freshness(serving.published_meta(data_dir.paths.reports).generated_at, datetime.now(UTC))


CHECKS = [
    payback_unique_key,
    payback_non_negative,
    payback_row_count,
    cohort_curves_unique_key,
    cohort_curves_row_count,
    spend_valid,
    published_reports_fresh,
]
