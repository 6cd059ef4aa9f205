"""Report assets: daily inputs (acquisitions, subscription events, active days, spend), then the payback cube,
cohort curves, LTV projections and the published report store the API reads.

The daily assets are partitioned by UTC day with a single-run backfill policy: a refresh of a
range of changed days is one run that rewrites exactly those days, computed a batch of days at
a time and split by day. The cube and the weekly activity are themselves daily (rows keyed by
activity day, additive), so the whole-table assets only concatenate small daily results and
add running sums, never touching events.
`action_signals`, the actions engine's input, is daily too, but by cohort day (see there).
Upstream: `canonical_events` (the events domain) and `spend_raw` (the spend domain). Every asset
is named after the lake dataset it writes (`warehouse.reports.report_lake`), and so is its function.
"""

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import dagster as dg
import polars as pl
from dagster import AssetExecutionContext

from orchestration.metadata import ANALYTICS_TEAM, DUCKDB_KINDS, LAKE_KINDS, asset_tags, frame_metadata
from orchestration.partitions import STALE_DAYS_ONLY_TAG, daily_partitions, run_days
from orchestration.resources import DatabaseResource, DataDirResource
from transforms.experiments import results as experiment_model
from transforms.reports import lifecycle, paywall_funnel
from transforms.reports import ltv as ltv_model
from transforms.reports import payback as payback_model
from transforms.reports import signals as signals_model
from transforms.reports.schemas import SIGNAL_WINDOW_DAYS, WEEK_LOOKBACK_DAYS
from transforms.subscriptions import metrics as subscription_model
from transforms.subscriptions import periods as subscription_periods
from warehouse import fx
from warehouse.experiments import results as experiment_store
from warehouse.lake import Lake
from warehouse.reports import published, report_lake, serving
from warehouse.subscriptions import inputs as subscription_inputs
from warehouse.webhooks import payback_updates

GROUP = "reports"
SINGLE_RUN = dg.BackfillPolicy.single_run()


def _common(tier: str) -> dict[str, Any]:
    """What every report asset declares besides its own name, inputs and description."""
    return {
        "group_name": GROUP,
        "owners": [ANALYTICS_TEAM],
        "kinds": DUCKDB_KINDS if tier == "published" else LAKE_KINDS,
        "tags": asset_tags(GROUP, tier),
    }


def _daily_asset(**kwargs: Any) -> dict[str, Any]:
    return {**_common("derived"), "partitions_def": daily_partitions, "backfill_policy": SINGLE_RUN, **kwargs}


# Days computed together: a batch joins its events against every user's cohort once, where one
# day at a time repeated that join for each day. Bounded so that a long backfill's memory is a
# month's data, not the whole range's.
BATCH_DAYS = 31


def _batches(days: list[date]) -> list[list[date]]:
    """Runs of consecutive days, at most BATCH_DAYS long: a batch's computation reads and emits
    every day from its first to its last, so a gap (a day not to recompute) starts a new one."""
    batches: list[list[date]] = []
    for day in days:
        if batches and len(batches[-1]) < BATCH_DAYS and day - batches[-1][-1] == timedelta(days=1):
            batches[-1].append(day)
        else:
            batches.append([day])
    return batches


def _days_to_compute(context: AssetExecutionContext, lake: Lake, target: str) -> list[date]:
    """The run's days; on a stale-days-only refresh, those of them stale for this dataset now
    (its inputs were just rewritten upstream in the same run, so the chain follows)."""
    days = run_days(context)
    if context.run.tags.get(STALE_DAYS_ONLY_TAG) != "true":
        return days
    stale = set(report_lake.stale_for(lake, target))
    return [day for day in days if day in stale]


def _daily(
    context: AssetExecutionContext,
    lake: Lake,
    target: str,
    compute: Callable[[list[date]], pl.LazyFrame],
    day_of: pl.Expr,
) -> dg.MaterializeResult:
    """Recompute the run's days (or its stale ones), a batch at a time, and replace each day's
    partition whole. `compute` gives the rows of a batch of consecutive days; `day_of` says which
    day a row is of. `days` in the metadata counts the days recomputed, not the run's range."""
    rows, last = 0, pl.DataFrame(schema=report_lake.SCHEMAS[target])
    days = _days_to_compute(context, lake, target)
    for batch in _batches(days):
        frame = compute(batch).collect()
        if target == report_lake.ACQUISITIONS:
            report_lake.mark_cohort_readers_stale(lake, report_lake.changed_cohort_users(lake, batch, frame))
        written = report_lake.write_days(lake, target, batch, frame, day_of)
        rows += sum(written.values())
        last = frame.filter(day_of == batch[-1])
    return dg.MaterializeResult(
        metadata=frame_metadata(last, days=len(days), rows_written=rows) | {"dagster/row_count": rows}
    )


def _from_raw(
    name: str,
    source: str,
    transform: Callable[[pl.LazyFrame], pl.LazyFrame],
    day_column: str,
    description: str,
) -> dg.AssetsDefinition:
    """A daily asset computed from one raw lake dataset (`canonical_events` or `spend_raw`)."""
    upstream = dg.AssetKey(source)

    @dg.asset(**_daily_asset(name=name, deps=[upstream], description=description))
    def _asset(context: AssetExecutionContext, data_dir: DataDirResource) -> dg.MaterializeResult:
        store_ = data_dir.paths.lake()
        compute = lambda days: transform(report_lake.scan_days(store_, source, days))  # noqa: E731
        return _daily(context, store_, name, compute, pl.col(day_column))

    return _asset


# Idempotent: each day is recomputed from its raw partition and replaced whole.
acquisitions = _from_raw(
    report_lake.ACQUISITIONS,
    report_lake.CANONICAL_EVENTS,
    lambda events: lifecycle.acquisitions(events).lazy(),
    "cohort_date",
    "Users first installed on the day: campaign, creative, country, platform, and the paywall and offer "
    "they met on the install day.",
)


def _money(database: DatabaseResource, data_dir: DataDirResource) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ECB rates and each workspace's reporting currency, read once per run."""
    with database.database().read() as conn:
        reporting = fx.reporting_currencies(conn)
    return fx.load_rates(data_dir.paths), reporting


def _converted_from_raw(
    name: str,
    source: str,
    transform: Callable[[pl.LazyFrame, pl.DataFrame, pl.DataFrame], pl.LazyFrame],
    day_column: str,
    description: str,
) -> dg.AssetsDefinition:
    """A daily asset computed from one raw lake dataset whose amounts are converted to each
    workspace's reporting currency (`transform(frame, rates, reporting)`)."""

    @dg.asset(**_daily_asset(name=name, deps=[dg.AssetKey(source)], description=description))
    def _asset(
        context: AssetExecutionContext, database: DatabaseResource, data_dir: DataDirResource
    ) -> dg.MaterializeResult:
        store_ = data_dir.paths.lake()
        rates, reporting = _money(database, data_dir)
        compute = lambda days: transform(report_lake.scan_days(store_, source, days), rates, reporting)  # noqa: E731
        return _daily(context, store_, name, compute, pl.col(day_column))

    return _asset


# Idempotent, as the others: each day is recomputed from its raw partition and replaced whole.
subscription_events = _converted_from_raw(
    report_lake.SUBSCRIPTION_EVENTS,
    report_lake.CANONICAL_EVENTS,
    lifecycle.subscription_events,
    "event_date",
    "Trial, subscription, renewal, cancellation and refund events of the day, parsed once, amounts in the "
    "workspace's reporting currency at the ECB rate of the day (original amount and currency kept).",
)


active_days = _from_raw(
    report_lake.ACTIVE_DAYS,
    report_lake.CANONICAL_EVENTS,
    lifecycle.active_days,
    "event_date",
    "Each user active on the day (any event but an install): what cohort retention counts.",
)


paywall_events = _from_raw(
    report_lake.PAYWALL_EVENTS,
    report_lake.CANONICAL_EVENTS,
    paywall_funnel.paywall_events,
    "event_date",
    "The paywall funnel steps apps reported on the day (impression, offer_tap, purchase_start, trial_start, "
    "convert, cancel), with app, paywall, variant, version and offer as columns.",
)


spend = _converted_from_raw(
    report_lake.SPEND,
    report_lake.SPEND_RAW,
    lifecycle.clean_spend,
    "spend_date",
    "Daily ad spend by campaign, creative and country; one row per key, restatements win; in the workspace's "
    "reporting currency at the ECB rate of the day.",
)


def _cohorts(lake: Lake) -> pl.LazyFrame:
    """Every user's first acquisition, read once per run (tens of MB per million users)."""
    return lifecycle.user_cohorts(report_lake.scan_days(lake, report_lake.ACQUISITIONS)).lazy()


@dg.asset(
    **_daily_asset(
        deps=[acquisitions, subscription_events, spend],
        description="The payback cube rows whose activity day is this day (installs and spend of the day's cohort).",
    )
)
def payback_daily(context: AssetExecutionContext, data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: each day is recomputed from that day's events and spend and replaced whole."""
    store_ = data_dir.paths.lake()
    cohorts = _cohorts(store_)

    def compute(days: list[date]) -> pl.LazyFrame:
        return payback_model.daily_rows(
            cohorts,
            cohorts.filter(pl.col("cohort_date").is_between(days[0], days[-1])),
            report_lake.scan_days(store_, report_lake.SUBSCRIPTION_EVENTS, days),
            report_lake.scan_days(store_, report_lake.SPEND, days),
        )

    activity_day = pl.col("cohort_date") + pl.duration(days=pl.col("day"))
    return _daily(context, store_, report_lake.PAYBACK_DAILY, compute, activity_day)


@dg.asset(
    **_daily_asset(
        deps=[acquisitions, subscription_events, active_days],
        description="Weekly activations (first event of a week since install) and net revenue of the day, per group.",
    )
)
def cohort_activity(context: AssetExecutionContext, data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: each day is recomputed from the active days of that day and the 6 before it."""
    store_ = data_dir.paths.lake()
    cohorts = _cohorts(store_)

    def compute(days: list[date]) -> pl.LazyFrame:
        window = [days[0] - timedelta(days=k) for k in range(WEEK_LOOKBACK_DAYS, 0, -1)] + days
        return payback_model.cohort_activity(
            cohorts,
            cohorts.filter(pl.col("cohort_date").is_between(days[0], days[-1])),
            report_lake.scan_days(store_, report_lake.ACTIVE_DAYS, window),
            report_lake.scan_days(store_, report_lake.SUBSCRIPTION_EVENTS, window),
            (days[0], days[-1]),
        )

    return _daily(context, store_, report_lake.COHORT_ACTIVITY, compute, pl.col("activity_date"))


@dg.asset(
    **_daily_asset(
        deps=[acquisitions, subscription_events, spend],
        description=(
            "Growth-action signals of the day's cohort per campaign x creative x country x offer x paywall: "
            "installs, spend, trials, conversions, subscriptions, refunded users, and per-user net revenue "
            "sums and sums of squares at days 7, 14 and 30 since install."
        ),
    )
)
def action_signals(context: AssetExecutionContext, data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: each cohort day is recomputed from its users' events of the 30 days since
    their install and its spend, and replaced whole. Partitioned by cohort day, not by activity
    day like the cube: a sum of squares of per-user totals does not add up across days, so a
    cohort's rows are computed in one piece, and recomputed whenever a day of its window (or the
    day after, which completes it) is rewritten (`report_lake.DERIVED_FROM`)."""
    store_ = data_dir.paths.lake()
    cohorts = _cohorts(store_)
    observed = report_lake.partition_days(store_, report_lake.SUBSCRIPTION_EVENTS)

    def compute(days: list[date]) -> pl.LazyFrame:
        window = [days[0] + timedelta(days=k) for k in range((days[-1] - days[0]).days + SIGNAL_WINDOW_DAYS)]
        return signals_model.action_signals(
            cohorts.filter(pl.col("cohort_date").is_between(days[0], days[-1])),
            report_lake.scan_days(store_, report_lake.SUBSCRIPTION_EVENTS, window),
            report_lake.scan_days(store_, report_lake.SPEND, days),
            max(observed, default=days[-1]),
        )

    return _daily(context, store_, report_lake.ACTION_SIGNALS, compute, pl.col("cohort_date"))


def _whole_table(lake: Lake, dataset: str, frame: pl.DataFrame) -> dg.MaterializeResult:
    previous = report_lake.table_rows(lake, dataset)
    report_lake.write_table(lake, dataset, frame)
    return dg.MaterializeResult(
        metadata=frame_metadata(frame, previous_row_count=previous if previous is not None else -1)
    )


@dg.asset(
    **_common("derived"),
    deps=[payback_daily],
    description=(
        "Payback cube: cohort day x dimension x value x day since install with installs, spend, trials, "
        "conversions, subscriptions, revenue, refunds and cumulative revenue."
    ),
)
def payback(data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: the daily rows concatenated with running sums, swapped in atomically."""
    store_ = data_dir.paths.lake()
    frame = payback_model.cumulate(report_lake.scan_days(store_, report_lake.PAYBACK_DAILY)).collect()
    return _whole_table(store_, report_lake.PAYBACK, frame)


@dg.asset(
    **_common("derived"),
    deps=[cohort_activity],
    description="Weekly retention and net revenue per cohort day and group, complete weeks only.",
)
def cohort_curves(data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: rebuilt whole from the daily datasets and swapped in atomically."""
    store_ = data_dir.paths.lake()
    as_of = report_lake.last_day(store_) or datetime.now(UTC).date()
    frame = payback_model.cohort_curves(report_lake.scan_days(store_, report_lake.COHORT_ACTIVITY), as_of).collect()
    return _whole_table(store_, report_lake.COHORT_CURVES, frame)


@dg.asset(
    **_common("derived"),
    deps=[cohort_curves],
    description="One-year LTV per install per group: shifted-beta-geometric retention x revenue per active week.",
)
def ltv(data_dir: DataDirResource) -> dg.MaterializeResult:
    """Idempotent: refit from the current cohort curves and replaced whole."""
    store_ = data_dir.paths.lake()
    frame = ltv_model.ltv_projections(report_lake.scan_table(store_, report_lake.COHORT_CURVES).collect())
    return _whole_table(store_, report_lake.LTV, frame)


@dg.asset(
    **_common("derived"),
    deps=[dg.AssetKey(report_lake.CANONICAL_EVENTS), acquisitions],
    description=(
        "Subscription metrics by UTC day and group (store, product, app, country, campaign): active "
        "subscriptions and trials, MRR, new, trials, conversions, reactivations, churn, refunds and revenue "
        "(docs/metrics.md); the lapses and returns with their pairs, for weeks and months; and every purchase "
        "with its latest state (purchases)."
    ),
)
def subscription_metrics(data_dir: DataDirResource, database: DatabaseResource) -> dg.MaterializeResult:
    """Idempotent: recomputed whole from the billing events and the ledger, as of now, and only the
    days whose rows changed are rewritten. Whole, not a day at a time: a day's actives and MRR
    are the running sum of every movement before it, so a late event (a refund, a renewal
    restated) changes its own day and every day after it, which is what gets rewritten."""
    store_ = data_dir.paths.lake()
    rates, reporting = _money(database, data_dir)
    with database.database().read() as conn:
        grants = subscription_inputs.grants_frame(conn)
        catalog = subscription_inputs.catalog_frame(conn)
    as_of = datetime.now(UTC)
    daily, paired, billing = subscription_model.compute(
        report_lake.scan_days(store_, report_lake.CANONICAL_EVENTS),
        grants=grants,
        catalog=catalog,
        users=lifecycle.user_cohorts(report_lake.scan_days(store_, report_lake.ACQUISITIONS)),
        rates=rates,
        reporting=reporting,
        as_of=as_of,
    )
    days = report_lake.write_changed_days(store_, report_lake.SUBSCRIPTION_METRICS, daily, pl.col("date"))
    report_lake.write_table(store_, report_lake.SUBSCRIPTION_MOVEMENTS, paired)
    with database.database().read() as conn:
        ledger = subscription_inputs.ledger_purchases(conn, as_of)
    purchases = subscription_periods.purchases(ledger, billing)
    report_lake.write_table(store_, report_lake.PURCHASES, purchases)
    return dg.MaterializeResult(
        metadata=frame_metadata(daily.tail(1000))
        | {
            "as_of": as_of.isoformat(),
            "days_rewritten": len(days),
            "rows": daily.height,
            "movement_rows": paired.height,
            "purchases": purchases.height,
            "dagster/row_count": daily.height,
        }
    )


@dg.asset(
    **_common("derived"),
    deps=[dg.AssetKey(report_lake.CANONICAL_EVENTS)],
    description=(
        "Each started paywall experiment's results (issue 35): exposures joined with the users' billing "
        "facts after exposure; per variant the counts, revenue per user at D7/D14/D30 (matured users only), "
        "chance to beat control and to be best, the lift's interval, expected loss, and the sample-ratio "
        "check; stored for the API and the dashboard, experiment.srm_detected announced once."
    ),
)
def experiment_results(data_dir: DataDirResource, database: DatabaseResource) -> dg.MaterializeResult:
    """Idempotent: recomputed whole from every exposure and billing fact as of now; the stored
    results of each experiment are replaced (an SRM alarm is announced only the first time)."""
    db = database.database()
    with db.read() as conn:
        found = experiment_store.analysed(conn)
        exposures = experiment_store.exposures_frame(conn, [a.experiment for a in found])
    if not found:
        return dg.MaterializeResult(metadata={"experiments": 0, "exposures": 0})
    rates, reporting = _money(database, data_dir)
    as_of = datetime.now(UTC)
    workspaces = sorted({a.experiment.workspace_id for a in found})
    events = report_lake.scan_days(data_dir.paths.lake(), report_lake.CANONICAL_EVENTS).filter(
        pl.col("workspace_id").is_in(workspaces)
    )
    billing = subscription_periods.billing_events(events, rates, reporting).filter(pl.col("occurred_at") <= as_of)
    billing_frame = billing.collect()
    announced = 0
    for workspace_id in workspaces:
        mine = [a for a in found if a.experiment.workspace_id == workspace_id]
        ids = [a.experiment.id for a in mine]
        results = experiment_model.experiment_results(
            [a.definition for a in mine],
            exposures.lazy().filter(pl.col("experiment_id").is_in(ids)),
            billing_frame.lazy().filter(pl.col("workspace_id") == workspace_id),
            as_of,
        )
        with db.write() as conn:
            for analysed, result in zip(mine, results, strict=True):
                announced += experiment_store.store(conn, analysed.experiment, result)
    return dg.MaterializeResult(
        metadata={
            "as_of": as_of.isoformat(),
            "experiments": len(found),
            "exposures": exposures.height,
            "srm_announced": announced,
            "dagster/row_count": len(found),
        }
    )


@dg.asset(
    **_common("published"),
    deps=[payback, cohort_curves, ltv, subscription_metrics],
    description=(
        "reports.duckdb: the tables the reports API queries, swapped in atomically with generated_at; "
        "then one report.payback_updated event per workspace whose payback rows changed."
    ),
)
def published_reports(data_dir: DataDirResource, database: DatabaseResource) -> dg.MaterializeResult:
    """Idempotent: a new file is built from the current tables and renamed over the old one, then
    its payback digests are compared with those last notified (`warehouse.webhooks.payback_updates`).
    The comparison is against what was announced, not the previous file, so a run that fails
    between the two (database down, process killed) is caught up by `payback_updated_sensor`'s
    run or the next refresh, whichever comes first."""
    paths = data_dir.paths
    store_ = paths.lake()
    generated_at = datetime.now(UTC)
    counts, where = published.build_and_publish(
        paths, store_, generated_at=generated_at, as_of=report_lake.last_day(store_)
    )
    updates = payback_updates.notify_payback_updates(database.database(), serving.payback_digests(paths.reports))
    return dg.MaterializeResult(
        metadata={
            **{f"rows_{name}": n for name, n in counts.items()},
            "generated_at": generated_at.isoformat(),
            "path": dg.MetadataValue.path(where),
            "payback_updated_events": len(updates),
        }
    )


DAILY_ASSETS = [
    acquisitions,
    subscription_events,
    active_days,
    paywall_events,
    spend,
    payback_daily,
    cohort_activity,
    action_signals,
]
TABLE_ASSETS = [payback, cohort_curves, ltv, subscription_metrics, experiment_results, published_reports]
ASSETS = [*DAILY_ASSETS, *TABLE_ASSETS]
