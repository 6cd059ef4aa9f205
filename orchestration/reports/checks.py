"""Checks on the report tables. The ones guarding what the API serves are blocking: a failure
stops `published_reports`, so the API keeps answering from the last good store.

`published_reports_fresh` runs in every refresh run (where it passes: the store was just
published) and, on its own, when `published_reports_freshness_sensor` sees the store outgrow
its promise (6 hours plus a grace period), where it fails until the next publish.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import polars as pl
from dagster import AssetCheckExecutionContext

from orchestration.reports.assets import (
    cohort_curves,
    payback,
    published_reports,
    spend,
    subscription_events,
    subscription_metrics,
)
from orchestration.resources import DataDirResource
from transforms.reports import money, quality
from transforms.reports.schemas import COHORT_CURVE_KEY, MEASURES, PAYBACK_KEY, SPEND_KEY
from transforms.subscriptions import quality as subscription_quality
from warehouse.reports import report_lake, serving
from warehouse.reports.published import current_reports

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
    frame = report_lake.scan_table(data_dir.paths.lake(), report_lake.PAYBACK)
    return _result(quality.duplicate_keys(frame, PAYBACK_KEY), "duplicate keys")


@dg.asset_check(asset=payback, blocking=True, description="Spend, revenue and refunds are never negative.")
def payback_non_negative(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = report_lake.scan_table(data_dir.paths.lake(), report_lake.PAYBACK)
    return _result(quality.negative_rows(frame, ("spend", "revenue", "refunds", "cumulative_revenue")), "negative rows")


@dg.asset_check(asset=cohort_curves, blocking=True, description="One row per cohort day, dimension, value and week.")
def cohort_curves_unique_key(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = report_lake.scan_table(data_dir.paths.lake(), report_lake.COHORT_CURVES)
    return _result(quality.duplicate_keys(frame, COHORT_CURVE_KEY), "duplicate keys")


@dg.asset_check(
    asset=subscription_metrics,
    blocking=True,
    description="Actives, trials and MRR never negative; each day's actives = the previous day's + new - churned "
    "+ reactivated, in every group.",
)
def subscription_metrics_consistent(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = report_lake.scan_days(data_dir.paths.lake(), report_lake.SUBSCRIPTION_METRICS)
    negative = subscription_quality.negative_stocks(frame)
    broken = subscription_quality.broken_identity(frame)
    return _result(negative + broken, "inconsistent rows", negative_stocks=negative, broken_identity=broken)


@dg.asset_check(asset=spend, blocking=True, description="All spend days: one row per key, no negative amount.")
def spend_valid(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = report_lake.scan_days(data_dir.paths.lake(), report_lake.SPEND)
    failures = quality.duplicate_keys(frame, SPEND_KEY) + quality.negative_rows(frame, ("spend",))
    return _result(failures, "duplicate or negative spend rows")


# What a failing money check names in its description; the metadata has the count.
_NAMED = 5


def _unconverted_result(found: pl.DataFrame) -> dg.AssetCheckResult:
    named = "; ".join(
        f"{r['rows']} {r['currency'] or '(no currency)'} on {r['day']} in {r['workspace_id']} ({r['reason']})"
        for r in found.head(_NAMED).iter_rows(named=True)
    )
    more = f" and {found.height - _NAMED} more" if found.height > _NAMED else ""
    rows = int(found.get_column("rows").sum()) if found.height else 0
    return dg.AssetCheckResult(
        passed=found.height == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"amounts without a converted value: {named}{more}" if found.height else None,
        metadata={"failures": rows, "currency_days": found.height},
    )


@dg.asset_check(
    asset=subscription_events,
    blocking=True,
    description="Every amount is converted to its workspace's reporting currency (ISO 4217 money with an ECB rate).",
)
def subscription_events_converted(data_dir: DataDirResource) -> dg.AssetCheckResult:
    lake = data_dir.paths.lake()
    return _unconverted_result(
        money.unconverted(report_lake.scan_days(lake, report_lake.SUBSCRIPTION_EVENTS), "event_date")
    )


@dg.asset_check(
    asset=spend,
    blocking=True,
    description="Every spend amount is converted to its workspace's reporting currency (ISO 4217, with an ECB rate).",
)
def spend_converted(data_dir: DataDirResource) -> dg.AssetCheckResult:
    lake = data_dir.paths.lake()
    return _unconverted_result(money.unconverted(report_lake.scan_days(lake, report_lake.SPEND), "spend_date"))


@dg.asset_check(
    asset=payback,
    blocking=True,
    description=f"Every sum is a finite number below the overflow guard ({money.OVERFLOW_GUARD:.0e}).",
)
def payback_sums_bounded(data_dir: DataDirResource) -> dg.AssetCheckResult:
    frame = report_lake.scan_table(data_dir.paths.lake(), report_lake.PAYBACK)
    sums = tuple(c for c, kind in MEASURES.items() if kind == pl.Float64())
    columns = (*sums, "cumulative_revenue", "cumulative_net_revenue")
    return _result(money.unbounded_rows(frame, columns), "rows with a non-finite or overflowing sum")


@dg.asset_check(
    asset=subscription_events,
    description=f"No day's revenue is above {money.SPIKE_FACTOR:g}x the median of the {money.SPIKE_WINDOW_DAYS} "
    f"days before it (with at least {money.SPIKE_MIN_HISTORY_DAYS} of them): a warning, a unit or currency "
    "error far more often than a real day.",
)
def subscription_events_revenue_spike(data_dir: DataDirResource) -> dg.AssetCheckResult:
    lake = data_dir.paths.lake()
    spikes = money.revenue_spikes(report_lake.scan_days(lake, report_lake.SUBSCRIPTION_EVENTS))
    named = "; ".join(
        f"{r['event_date']} in {r['workspace_id']}: {r['revenue']:.2f} vs median {r['trailing_median']:.2f}"
        for r in spikes.head(_NAMED).iter_rows(named=True)
    )
    return dg.AssetCheckResult(
        passed=spikes.height == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"revenue spikes: {named}" if spikes.height else None,
        metadata={"failures": spikes.height, "factor": money.SPIKE_FACTOR, "window_days": money.SPIKE_WINDOW_DAYS},
    )


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
    return freshness(serving.published_meta(current_reports(data_dir.paths)).generated_at, datetime.now(UTC))


CHECKS = [
    payback_unique_key,
    subscription_metrics_consistent,
    payback_non_negative,
    payback_sums_bounded,
    payback_row_count,
    cohort_curves_unique_key,
    cohort_curves_row_count,
    spend_valid,
    spend_converted,
    subscription_events_converted,
    subscription_events_revenue_spike,
    published_reports_fresh,
]
