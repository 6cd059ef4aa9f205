"""Report assets: daily inputs (acquisitions, subscription events, spend), then the payback cube,
cohort curves, LTV projections and the published report store the API reads.

The daily assets are partitioned by UTC day with a single-run backfill policy: a refresh of a
range of changed days is one run that rewrites exactly those days. The whole-table assets are
rebuilt from the (small, already parsed) daily datasets, never from raw events.
`canonical_events` (ingest) and `spend_raw` (ad-platform syncs) are upstream assets defined
elsewhere; Dagster shows them as external until they are.
"""

from datetime import UTC, date, datetime, timedelta

import dagster as dg
import polars as pl
from dagster import AssetExecutionContext

from orchestration.metadata import frame_metadata
from orchestration.partitions import daily_partitions
from orchestration.resources import LakeResource
from transforms.reports import lifecycle, ltv, payback
from warehouse.lake import Lake
from warehouse.reports import serving, store

GROUP = "reports"
CANONICAL_EVENTS = dg.AssetKey("canonical_events")
SPEND_RAW = dg.AssetKey("spend_raw")
SINGLE_RUN = dg.BackfillPolicy.single_run()


def partition_days(context: AssetExecutionContext) -> list[date]:
    window = context.partition_time_window
    first, last = window.start.date(), window.end.date()
    return [first + timedelta(days=i) for i in range((last - first).days)]


def _daily(
    context: AssetExecutionContext, lake: Lake, source: str, target: str, transform: object
) -> dg.MaterializeResult:
    """Recompute each day of the run's range from that day's raw partition alone."""
    rows, last = 0, pl.DataFrame(schema=store.SCHEMAS[target])
    days = partition_days(context)
    for day in days:
        last = transform(store.scan_days(lake, source, [day])).collect()  # type: ignore[operator]
        store.write_day(lake, target, day, last)
        rows += last.height
    return dg.MaterializeResult(
        metadata=frame_metadata(last, days=len(days), rows_written=rows) | {"dagster/row_count": rows}
    )


@dg.asset(
    group_name=GROUP,
    deps=[CANONICAL_EVENTS],
    partitions_def=daily_partitions,
    backfill_policy=SINGLE_RUN,
    description="First install per user of the day, with campaign, creative, country and platform.",
)
def acquisitions(context: AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: each day is recomputed from its canonical_events partition and replaced whole."""
    return _daily(context, lake.lake(), store.CANONICAL_EVENTS, store.ACQUISITIONS, lifecycle.acquisitions)


@dg.asset(
    group_name=GROUP,
    deps=[CANONICAL_EVENTS],
    partitions_def=daily_partitions,
    backfill_policy=SINGLE_RUN,
    description="Paywall, trial, subscription, renewal, cancellation and refund events of the day, parsed once.",
)
def subscription_events(context: AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: each day is recomputed from its canonical_events partition and replaced whole."""
    return _daily(
        context, lake.lake(), store.CANONICAL_EVENTS, store.SUBSCRIPTION_EVENTS, lifecycle.subscription_events
    )


@dg.asset(
    group_name=GROUP,
    deps=[SPEND_RAW],
    partitions_def=daily_partitions,
    backfill_policy=SINGLE_RUN,
    description="Daily ad spend by campaign, creative and country; one row per key, restatements win.",
)
def spend(context: AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: each day is recomputed from its spend_raw partition and replaced whole."""
    return _daily(context, lake.lake(), store.SPEND_RAW, store.SPEND, lifecycle.clean_spend)


@dg.asset(
    group_name=GROUP,
    deps=[acquisitions, subscription_events],
    description="Every acquired user with cohort day and group values (campaign, creative, country, offer, paywall).",
)
def user_cohorts(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: rebuilt whole from the daily datasets and swapped in atomically."""
    store_ = lake.lake()
    frame = lifecycle.user_cohorts(
        store.scan_days(store_, store.ACQUISITIONS), store.scan_days(store_, store.SUBSCRIPTION_EVENTS)
    ).collect()
    store.write_table(store_, store.USER_COHORTS, frame)
    return dg.MaterializeResult(metadata=frame_metadata(frame))


def _whole_table(lake: Lake, dataset: str, frame: pl.DataFrame) -> dg.MaterializeResult:
    previous = store.table_rows(lake, dataset)
    store.write_table(lake, dataset, frame)
    return dg.MaterializeResult(
        metadata=frame_metadata(frame, previous_row_count=previous if previous is not None else -1)
    )


@dg.asset(
    name="payback",
    group_name=GROUP,
    deps=[user_cohorts, subscription_events, spend],
    description=(
        "Payback cube: cohort day x dimension x value x day since install with installs, spend, trials, "
        "conversions, subscriptions, revenue, refunds and cumulative revenue."
    ),
)
def payback_cube(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: rebuilt whole from the daily datasets and swapped in atomically."""
    store_ = lake.lake()
    frame = payback.payback_cube(
        store.scan_table(store_, store.USER_COHORTS),
        store.scan_days(store_, store.SUBSCRIPTION_EVENTS),
        store.scan_days(store_, store.SPEND),
    ).collect()
    return _whole_table(store_, store.PAYBACK, frame)


@dg.asset(
    group_name=GROUP,
    deps=[user_cohorts, subscription_events],
    description="Weekly retention and net revenue per cohort day and group, complete weeks only.",
)
def cohort_curves(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: rebuilt whole from the daily datasets and swapped in atomically."""
    store_ = lake.lake()
    as_of = store.last_day(store_) or datetime.now(UTC).date()
    frame = payback.cohort_curves(
        store.scan_table(store_, store.USER_COHORTS), store.scan_days(store_, store.SUBSCRIPTION_EVENTS), as_of
    ).collect()
    return _whole_table(store_, store.COHORT_CURVES, frame)


@dg.asset(
    group_name=GROUP,
    deps=[cohort_curves],
    description="One-year LTV per install per group: shifted-beta-geometric retention x revenue per active week.",
)
def ltv_projections(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: refit from the current cohort curves and replaced whole."""
    store_ = lake.lake()
    frame = ltv.ltv_projections(store.scan_table(store_, store.COHORT_CURVES).collect())
    return _whole_table(store_, store.LTV, frame)


@dg.asset(
    group_name=GROUP,
    deps=[payback_cube, cohort_curves, ltv_projections],
    description="reports.duckdb: the tables the reports API queries, swapped in atomically with generated_at.",
)
def published_reports(lake: LakeResource) -> dg.MaterializeResult:
    """Idempotent: a new file is built from the current tables and renamed over the old one."""
    store_ = lake.lake()
    generated_at = datetime.now(UTC)
    counts = serving.publish(
        serving.reports_path(lake.settings_data_dir), store_, generated_at=generated_at, as_of=store.last_day(store_)
    )
    return dg.MaterializeResult(
        metadata={
            **{f"rows_{name}": n for name, n in counts.items()},
            "generated_at": generated_at.isoformat(),
            "path": dg.MetadataValue.path(str(serving.reports_path(lake.settings_data_dir))),
        }
    )


DAILY_ASSETS = [acquisitions, subscription_events, spend]
TABLE_ASSETS = [user_cohorts, payback_cube, cohort_curves, ltv_projections, published_reports]
ASSETS = [*DAILY_ASSETS, *TABLE_ASSETS]
