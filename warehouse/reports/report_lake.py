"""Where the report datasets live in the lake, and how they are read and written.

Daily datasets (`<name>/date=YYYY-MM-DD/`, warehouse/lake.py): the inputs `canonical_events`
(written by the ingest pipeline) and `spend_raw` (written by ad-platform syncs, or the demo
seed), and the derived `acquisitions`, `subscription_events`, `active_days`, `spend`,
`payback_daily`, `cohort_activity`, `action_signals` (by cohort day). Whole-table datasets
(`<name>/data.parquet`): `payback`, `cohort_curves`, `ltv`. Every write is the lake's
atomic replace, so a re-run of a day rewrites exactly that day.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, timedelta

import polars as pl

from transforms.events import CANONICAL_EVENT_SCHEMA
from transforms.reports.paywall_funnel import PAYWALL_EVENT_SCHEMA
from transforms.reports.schemas import (
    ACQUISITION_SCHEMA,
    ACTION_SIGNAL_SCHEMA,
    ACTIVE_DAY_SCHEMA,
    CLEAN_SPEND_SCHEMA,
    COHORT_ACTIVITY_SCHEMA,
    COHORT_CURVE_SCHEMA,
    LTV_SCHEMA,
    PAYBACK_DAILY_SCHEMA,
    PAYBACK_SCHEMA,
    SIGNAL_WINDOW_DAYS,
    SPEND_KEY,
    SPEND_SCHEMA,
    SUBSCRIPTION_EVENT_SCHEMA,
    WEEK_LOOKBACK_DAYS,
)
from transforms.subscriptions import metrics
from transforms.subscriptions.periods import PURCHASE_SCHEMA
from warehouse.events.views import CANONICAL_EVENTS_DATASET
from warehouse.lake import Lake, Partition

CANONICAL_EVENTS = CANONICAL_EVENTS_DATASET  # the events domain names its dataset
SPEND_RAW = "spend_raw"
ACQUISITIONS = "acquisitions"
SUBSCRIPTION_EVENTS = "subscription_events"
ACTIVE_DAYS = "active_days"
SPEND = "spend"
PAYBACK_DAILY = "payback_daily"
COHORT_ACTIVITY = "cohort_activity"
ACTION_SIGNALS = "action_signals"
PAYBACK = "payback"
COHORT_CURVES = "cohort_curves"
LTV = "ltv"
SUBSCRIPTION_METRICS = "subscription_metrics"
PAYWALL_EVENTS = "paywall_events"
PURCHASES = "purchases"
SUBSCRIPTION_MOVEMENTS = "subscription_movements"

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    CANONICAL_EVENTS: CANONICAL_EVENT_SCHEMA,
    SPEND_RAW: SPEND_SCHEMA,
    ACQUISITIONS: ACQUISITION_SCHEMA,
    SUBSCRIPTION_EVENTS: SUBSCRIPTION_EVENT_SCHEMA,
    ACTIVE_DAYS: ACTIVE_DAY_SCHEMA,
    SPEND: CLEAN_SPEND_SCHEMA,
    PAYBACK_DAILY: PAYBACK_DAILY_SCHEMA,
    COHORT_ACTIVITY: COHORT_ACTIVITY_SCHEMA,
    ACTION_SIGNALS: ACTION_SIGNAL_SCHEMA,
    PAYBACK: PAYBACK_SCHEMA,
    COHORT_CURVES: COHORT_CURVE_SCHEMA,
    LTV: LTV_SCHEMA,
    SUBSCRIPTION_METRICS: dict(metrics.DAILY_SCHEMA),
    PAYWALL_EVENTS: dict(PAYWALL_EVENT_SCHEMA),
    PURCHASES: dict(PURCHASE_SCHEMA),
    SUBSCRIPTION_MOVEMENTS: dict(metrics.PAIRED_SCHEMA),
}
# Each derived daily dataset, the datasets its day D is computed from (its direct inputs, raw or
# derived), and how many days before and after D each input reaches: cohort activity of D looks
# back over D-6..D for the same week; the action signals of cohort day D read the events of its
# users' first SIGNAL_WINDOW_DAYS days, D..D+29, and one day more, D+30, whose arrival completes
# the cohort's 30-day horizon (`complete_days`). In dependency order: a dataset comes after its
# inputs. A day is stale for a dataset when one of these is newer than its partition, so a late
# event travels down the chain one asset at a time and stops where nothing depends on it.
DERIVED_FROM: dict[str, tuple[tuple[str, int, int], ...]] = {
    ACQUISITIONS: ((CANONICAL_EVENTS, 0, 0),),
    SUBSCRIPTION_EVENTS: ((CANONICAL_EVENTS, 0, 0),),
    ACTIVE_DAYS: ((CANONICAL_EVENTS, 0, 0),),
    PAYWALL_EVENTS: ((CANONICAL_EVENTS, 0, 0),),
    SPEND: ((SPEND_RAW, 0, 0),),
    PAYBACK_DAILY: ((ACQUISITIONS, 0, 0), (SUBSCRIPTION_EVENTS, 0, 0), (SPEND, 0, 0)),
    COHORT_ACTIVITY: (
        (ACQUISITIONS, 0, 0),
        (ACTIVE_DAYS, WEEK_LOOKBACK_DAYS, 0),
        (SUBSCRIPTION_EVENTS, WEEK_LOOKBACK_DAYS, 0),
    ),
    ACTION_SIGNALS: ((ACQUISITIONS, 0, 0), (SUBSCRIPTION_EVENTS, 0, SIGNAL_WINDOW_DAYS), (SPEND, 0, 0)),
}


def _readers_of(source_day: date, before: int, after: int) -> list[date]:
    """The days whose partition reads `source_day` of an input reaching `before` days back and
    `after` days ahead (the source day itself first)."""
    return [source_day + timedelta(days=k) for k in sorted(range(-after, before + 1), key=abs)]


# The daily datasets a user's cohort (day and attributes, from `acquisitions`) is read into for
# every day the user is active, not only the cohort's own day.
COHORT_READERS = (PAYBACK_DAILY, COHORT_ACTIVITY)
# The daily datasets keyed by cohort day: a changed user's cohort days (old and new) are what
# they read the user into.
COHORT_DAY_READERS = (ACTION_SIGNALS,)


def partition_days(lake: Lake, dataset: str) -> dict[date, Partition]:
    """Every day of a daily dataset that has a partition, in day order."""
    return lake.days(dataset)


def scan_days(lake: Lake, dataset: str, days: Iterable[date] | None = None) -> pl.LazyFrame:
    """A lazy scan of some (default: all) partitions of a daily dataset; typed and empty when none."""
    available = lake.days(dataset)
    wanted = available.values() if days is None else [available[d] for d in days if d in available]
    return lake.scan(wanted, SCHEMAS[dataset])


def scan_table(lake: Lake, dataset: str) -> pl.LazyFrame:
    table = lake.table(dataset)
    return lake.scan([table] if table else [], SCHEMAS[dataset])


def table_rows(lake: Lake, dataset: str) -> int | None:
    """Rows of the current whole-table file (None before the first write): the previous
    materialization's size, recorded before it is replaced."""
    table = lake.table(dataset)
    if table is None:
        return None
    return lake.scan([table], SCHEMAS[dataset]).select(pl.len()).collect().item()


def write_day(lake: Lake, dataset: str, day: date, frame: pl.DataFrame) -> None:
    lake.write_day(dataset, day, frame.select(list(SCHEMAS[dataset])))


def write_days(lake: Lake, dataset: str, days: list[date], frame: pl.DataFrame, day_of: pl.Expr) -> dict[date, int]:
    """Replace the partitions of `days` from one frame computed for all of them: each day gets
    the rows whose `day_of` is that day (a day without rows gets an empty partition). Returns
    the rows written per day. A row of any other day is a bug in the caller's computation and
    raises before anything is written."""
    parts = frame.with_columns(day_of.alias("__day")).partition_by("__day", as_dict=True, include_key=False)
    stray = sorted(str(key[0]) for key in parts if key[0] not in set(days))
    if stray:
        raise ValueError(f"{dataset}: rows for days outside {days[0]}..{days[-1]}: {', '.join(stray[:5])}")
    empty = pl.DataFrame(schema=frame.schema)
    columns = list(SCHEMAS[dataset])
    frames = {day: parts.get((day,), empty).select(columns) for day in days}
    lake.write_days(dataset, frames)  # one commit: the days become current together
    return {day: part.height for day, part in frames.items()}


def write_table(lake: Lake, dataset: str, frame: pl.DataFrame) -> Partition:
    return lake.write_table(dataset, frame.select(list(SCHEMAS[dataset])))


def write_changed_days(lake: Lake, dataset: str, frame: pl.DataFrame, day_of: pl.Expr) -> list[date]:
    """Replace the partitions whose rows differ from `frame`'s for that day (a day `frame` no
    longer has rows for is emptied), leaving the others untouched: for a dataset recomputed
    whole each run whose days mostly stay the same. Returns the days written."""
    columns = list(SCHEMAS[dataset])
    parts = {
        key[0]: part.select(columns)
        for key, part in frame.with_columns(day_of.alias("__day"))
        .partition_by("__day", as_dict=True, include_key=False)
        .items()
    }
    existing = partition_days(lake, dataset)
    empty = pl.DataFrame(schema=SCHEMAS[dataset])
    changed: dict[date, pl.DataFrame] = {}
    for day in sorted(set(parts) | set(existing)):
        new = parts.get(day, empty)
        old = lake.scan([existing[day]], SCHEMAS[dataset]).collect() if day in existing else None
        if old is None or not old.equals(new):
            changed[day] = new
    if changed:
        lake.write_days(dataset, changed)
    return sorted(changed)


def write_spend_raw(lake: Lake, spend: pl.DataFrame) -> list[date]:
    """Deliver spend the way an ad-platform sync does: per day, the delivery is appended to that
    day's file (rewritten atomically); a restated row of the same key wins downstream, since
    `clean_spend` keeps the last row per key."""

    def append() -> list[date]:
        days = []
        for (day,), frame in spend.sort("spend_date").group_by("spend_date", maintain_order=True):
            existing = scan_days(lake, SPEND_RAW, [day]).collect()
            merged = pl.concat([existing, frame.select(list(SPEND_SCHEMA))]) if existing.height else frame
            write_day(lake, SPEND_RAW, day, merged)
            days.append(day)
        return days

    return lake.update(SPEND_RAW, append)


def replace_spend_days(lake: Lake, workspace_id: str, days: list[date], spend: pl.DataFrame) -> list[date]:
    """Make `spend` the workspace's whole spend of each of `days` (an integration's re-pulled
    window), leaving other workspaces' rows of those days as they were.

    A day file holds every workspace's spend, and two syncs of different workspaces may write the
    same day at once: the read-modify-write of a day runs as one `Lake.update` (a lock on one
    host, a conditional commit that runs again on a conflict in an object store), so neither loses
    the other's rows. Rows are sorted, so the same delivery writes the same file."""
    frame = spend.select(list(SPEND_SCHEMA))
    outside = frame.filter(~pl.col("spend_date").is_in(days)).height
    if outside:
        raise ValueError(f"{outside} spend rows fall outside the days being replaced")
    return lake.update(SPEND_RAW, lambda: _replace_days(lake, workspace_id, days, frame))


def _replace_days(lake: Lake, workspace_id: str, days: list[date], frame: pl.DataFrame) -> list[date]:
    written = []
    for day in sorted(set(days)):
        existing = scan_days(lake, SPEND_RAW, [day]).collect()
        kept = existing.filter(pl.col("workspace_id") != workspace_id) if existing.height else existing
        mine = frame.filter(pl.col("spend_date") == day)
        if not existing.height and not mine.height:
            continue  # nothing was there and nothing arrives: no empty file (no stale day)
        merged = pl.concat([kept.select(list(SPEND_SCHEMA)), mine]).sort(list(SPEND_KEY))
        if existing.height and merged.equals(existing.sort(list(SPEND_KEY))):
            continue  # the same figures again: leave the file (and its stamp) alone
        write_day(lake, SPEND_RAW, day, merged)
        written.append(day)
    return written


def _stamps(lake: Lake, dataset: str) -> dict[date, int]:
    return {day: partition.stamp for day, partition in lake.days(dataset).items()}


def _written_with_another_schema(lake: Lake, dataset: str) -> set[date]:
    """Days whose partition has other columns than the dataset's schema now: written by an
    earlier FloKit (say, `subscription_events` before amounts were converted). They are derived,
    so recomputing them is the upgrade; reading them with today's schema would fail."""
    want = tuple(SCHEMAS[dataset])
    return {day for day, partition in lake.days(dataset).items() if lake.columns(partition) != want}


def stale_for(lake: Lake, dataset: str) -> list[date]:
    """The days of a derived dataset to recompute now: one of its inputs (D, D-6..D for cohort
    activity, D..D+30 for the action signals) is newer than its partition, or it has no
    partition while its day's input has one, or its partition was written with other columns
    than today's. Read by each asset as it starts, after its inputs in the same run were
    rewritten."""
    mine = _stamps(lake, dataset)
    stale: set[date] = _written_with_another_schema(lake, dataset)
    for source, before, after in DERIVED_FROM[dataset]:
        for day, changed in _stamps(lake, source).items():
            for target in _readers_of(day, before, after):
                have = mine.get(target)
                if (have is None and target == day) or (have is not None and have < changed):
                    stale.add(target)
    return sorted(stale)


def stale_by_dataset(lake: Lake) -> dict[str, list[date]]:
    """Per derived daily dataset, the days a refresh will recompute: those stale for it now, and
    those that become stale once its inputs are rewritten (a late event on D makes `acquisitions`
    D stale, then `payback_daily` D and `cohort_activity` D..D+6). Datasets with none are left out."""
    stale: dict[str, set[date]] = {}
    for dataset, sources in DERIVED_FROM.items():
        days, have = set(stale_for(lake, dataset)), partition_days(lake, dataset)
        for source, before, after in sources:
            for day in stale.get(source, ()):
                # As in stale_for: another day reading D only if it has a partition.
                days.update(t for t in _readers_of(day, before, after) if t == day or t in have)
        stale[dataset] = days
    return {dataset: sorted(days) for dataset, days in stale.items() if days}


def stale_days(lake: Lake) -> list[date]:
    """Every day some derived partition will be recomputed for by a refresh."""
    return sorted(set().union(*stale_by_dataset(lake).values()))


_USER = ["workspace_id", "user_id"]


def changed_cohort_users(lake: Lake, days: list[date], frame: pl.DataFrame) -> pl.DataFrame:
    """The users (workspace_id, user_id) whose acquisition rows on `days` differ between the
    current partitions and `frame`, about to replace them: a late install or install-day paywall
    event changes a user's cohort day or attributes, which every day the user is active reads."""
    old = scan_days(lake, ACQUISITIONS, days).collect()
    new = frame.select(list(ACQUISITION_SCHEMA))
    changed = pl.concat(
        [
            old.join(new, on=list(ACQUISITION_SCHEMA), how="anti", nulls_equal=True),
            new.join(old, on=list(ACQUISITION_SCHEMA), how="anti", nulls_equal=True),
        ]
    )
    return changed.select(_USER).unique()


def mark_cohort_readers_stale(lake: Lake, users: pl.DataFrame) -> list[date]:
    """Make every partition of the cohort readers (`payback_daily`, `cohort_activity`) that reads
    one of `users` stale (`Lake.mark_stale`: stamp 0, older than any input), so the next
    asset (or the next refresh, if the day is outside this run) recomputes it, and it keeps
    serving its rows until then. Those days: each acquisition day of the users (their previous
    cohort loses them), and each day they are active or have a subscription event (and the six
    after it, for the weekly activity). The cohort-day readers (`action_signals`) read a user
    into their cohort day's partition only: there, each acquisition day of the users is marked.
    Returns the days marked."""
    readers = {dataset: partition_days(lake, dataset) for dataset in (*COHORT_READERS, *COHORT_DAY_READERS)}
    if users.is_empty() or not any(readers.values()):  # the first refresh: nothing to mark yet
        return []
    cohort_days = scan_days(lake, ACQUISITIONS).join(users.lazy(), on=_USER).select(day=pl.col("cohort_date"))
    active = [
        scan_days(lake, dataset).join(users.lazy(), on=_USER).select(day=pl.col("event_date"))
        for dataset in (SUBSCRIPTION_EVENTS, ACTIVE_DAYS)
    ]
    acquired = set(cohort_days.unique().collect()["day"].to_list())
    days = acquired | set(pl.concat(active).unique().collect()["day"].to_list())
    marked: dict[str, set[date]] = {}
    for dataset in COHORT_READERS:
        reach = max((before for _, before, _after in DERIVED_FROM[dataset]), default=0)
        targets = {day + timedelta(days=k) for day in days for k in range(reach + 1)}
        marked[dataset] = targets & set(readers[dataset])
    for dataset in COHORT_DAY_READERS:
        marked[dataset] = acquired & set(readers[dataset])
    for dataset, targets in marked.items():
        lake.mark_stale(dataset, targets)
    return sorted(set().union(*marked.values()))


def last_day(lake: Lake) -> date | None:
    """The latest day with canonical events: the "as of" of the reports."""
    days = partition_days(lake, CANONICAL_EVENTS)
    return max(days) if days else None
