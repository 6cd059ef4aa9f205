"""The published report store `reports.duckdb` and the queries the reports API runs on it.

The `published_reports` asset copies the materialized `payback`, `cohort_curves` and `ltv`
tables into a new DuckDB file (as tables, sorted on the API's filter columns so zone maps skip
most rows), with the materialization time, and swaps it in the way every published DuckDB file
is (`warehouse.duckdb_files.publishing`); its path is `DataPaths.reports`. The store also carries
a digest of the payback rows per (workspace, cohort day), `payback_digests`: what
`report.payback_updated` compares with the digests a workspace was last notified of
(`warehouse.webhooks.payback_updates`), so the event follows from the live file alone and a
crash after the swap loses nothing.
API workers keep one read-only connection each and reopen it when the file's inode changes
(opening the file costs far more than a query: ARCHITECTURE "Facts", docs/benchmarks.md). Nothing here
opens DuckDB at import or app creation, so gunicorn can fork first.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from transforms.reports.curves import WeekSums, chain_ladder
from transforms.reports.schemas import PAYBACK_SCHEMA
from transforms.reports.summary import DAILY_SUMS_SCHEMA, ROAS_DAYS, payback_summary
from warehouse.duckdb_files import count_rows, literal, publishing
from warehouse.lake import Lake
from warehouse.reports.report_lake import (
    COHORT_CURVES,
    LTV,
    PAYBACK,
    SUBSCRIPTION_METRICS,
    SUBSCRIPTION_MOVEMENTS,
    scan_days,
    scan_table,
)


def _published_frames(lake: Lake) -> list[tuple[str, pl.LazyFrame]]:
    """The tables of the store, each read whole. Subscription metrics are sorted by workspace and
    day, the filter of every query on them (zone maps then skip the other workspaces' rows)."""
    by_day = [
        (SUBSCRIPTION_METRICS, scan_days(lake, SUBSCRIPTION_METRICS)),
        (SUBSCRIPTION_MOVEMENTS, scan_table(lake, SUBSCRIPTION_MOVEMENTS)),
    ]
    return [(name, scan_table(lake, name)) for name in (PAYBACK, COHORT_CURVES, LTV)] + [
        (name, frame.sort("workspace_id", "date")) for name, frame in by_day
    ]


def publish(path: Path, lake: Lake, *, generated_at: datetime, as_of: date | None) -> dict[str, int]:
    """Build the report store under a temp name and swap it in (`DataPaths.reports`). Returns rows per table."""
    counts: dict[str, int] = {}
    with publishing(path) as con:
        for name, frame in _published_frames(lake):
            con.register("frame", frame.collect().to_arrow())
            # Table names are our constants, never input; DDL cannot bind identifiers.
            con.sql(f"CREATE TABLE {name} AS SELECT * FROM frame")  # noqa: S608
            con.unregister("frame")
            counts[name] = count_rows(con, name)
        con.sql(_DIGESTS_SQL)
        counts[PAYBACK_DIGESTS] = count_rows(con, PAYBACK_DIGESTS)
        con.execute(
            "CREATE TABLE report_meta AS SELECT CAST(? AS TIMESTAMPTZ) AS generated_at, CAST(? AS DATE) AS as_of",
            [generated_at, as_of],
        )
    return counts


PAYBACK_DIGESTS = "payback_digests"
# Every column of a payback row but the two it is grouped by, in one fixed order. Amounts are
# rounded to 6 decimals first: recomputing a day sums the same amounts in another order, which
# moves the last bits of a float (seen: spend 12.57 against 12.570000000000002), and a change
# nobody can see is not an update. Reports show amounts to 2 decimals and ratios to 4. (`+ 0.0`
# turns a -0.0 left by rounding a tiny negative into 0.0, which prints differently.)
DIGEST_DECIMALS = 6
_DIGESTED = [
    f"round({c}, {DIGEST_DECIMALS}) + 0.0" if dtype.is_float() else c
    for c, dtype in PAYBACK_SCHEMA.items()
    if c not in ("workspace_id", "cohort_date")
]
# md5 of the cohort day's rows as text, in key order: a stable function of the values (DuckDB's
# `hash` is not promised to stay the same across releases, and an upgrade would then announce
# every cohort day as changed). Column names are our constants, never input.
_DIGESTS_SQL = f"""
CREATE TABLE {PAYBACK_DIGESTS} AS
SELECT workspace_id, cohort_date,
       md5(string_agg(CAST(row({", ".join(_DIGESTED)}) AS VARCHAR), chr(10) ORDER BY dimension, value, day)) AS digest
FROM {PAYBACK}
GROUP BY workspace_id, cohort_date
ORDER BY workspace_id, cohort_date
"""  # noqa: S608


@dataclass(frozen=True)
class PaybackDigests:
    """The payback digests of one published store, and when it was generated."""

    generated_at: datetime
    by_workspace: dict[str, dict[date, str]]


def payback_digests(path: Path) -> PaybackDigests | None:
    """The live store's digests per workspace and cohort day, read in one snapshot with its
    `generated_at` (None before the first publish, or for a store published before digests were)."""
    reader = ReportReader(path)
    try:
        cur = reader.cursor()
        if cur is None:
            return None
        generated_at = meta(cur).generated_at
        try:
            rows = cur.execute(f"SELECT workspace_id, cohort_date, digest FROM {PAYBACK_DIGESTS}").fetchall()  # noqa: S608
        except duckdb.CatalogException:
            return None
        if generated_at is None:
            return None
        by_workspace: dict[str, dict[date, str]] = {}
        for workspace_id, cohort_date, digest in rows:
            by_workspace.setdefault(workspace_id, {})[cohort_date] = digest
        return PaybackDigests(generated_at, by_workspace)
    finally:
        reader.close()


class ReportReader:
    """One read-only connection per process, reopened when the published file is replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._inode: int | None = None

    def cursor(self) -> duckdb.DuckDBPyConnection | None:
        """A cursor on the current file (None before the first publish). Cursors are cheap and
        make concurrent threads safe; a replaced file is picked up on the next call."""
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            return None
        with self._lock:
            if self._con is None or inode != self._inode:
                # `duckdb.connect(path)` would hand back the process's cached instance of the
                # OLD file while any connection to it lives; a fresh in-memory database that
                # ATTACHes the path really opens the new file. The old connection is dropped,
                # not closed: a thread may still be reading through one of its cursors.
                con = duckdb.connect()
                # One thread per query: a worker answers one small request at a time, and under
                # load thread hand-offs cost more than they save (figures: docs/benchmarks.md).
                con.execute("SET threads = 1")
                con.execute(f"ATTACH {literal(str(self.path))} AS reports (READ_ONLY)")
                self._con, self._inode = con, inode
            cur = self._con.cursor()
        cur.execute("USE reports")
        return cur

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
            self._con, self._inode = None, None


@dataclass(frozen=True)
class Meta:
    generated_at: datetime | None
    as_of: date | None


def meta(cur: duckdb.DuckDBPyConnection | None) -> Meta:
    if cur is None:
        return Meta(None, None)
    # fetchall, not fetchone: a result left unfinished keeps the cursor from its next query.
    rows = cur.execute("SELECT generated_at, as_of FROM report_meta").fetchall()
    return Meta(*rows[0]) if rows else Meta(None, None)


def published_meta(path: Path) -> Meta:
    """The meta of the store at `path`, read once (all None before the first publish): for
    callers without a long-lived reader, such as the freshness check."""
    reader = ReportReader(path)
    try:
        return meta(reader.cursor())
    finally:
        reader.close()


_DAILY_SQL = """
SELECT value, day,
       sum(installs) AS installs, sum(spend) AS spend, sum(trials) AS trials,
       sum(trial_conversions) AS trial_conversions, sum(subscriptions) AS subscriptions,
       sum(revenue - refunds) AS net_revenue
FROM payback
WHERE workspace_id = $workspace AND dimension = $dimension
  AND cohort_date BETWEEN $start AND $end AND day < greatest($window, $roas_days)
GROUP BY value, day
"""

_LTV_SQL = "SELECT value, ltv_projected FROM ltv WHERE workspace_id = $workspace AND dimension = $dimension"

# Per group and week, over the cohorts whose week is complete (the only rows the table holds):
# the sums `chain_ladder` estimates each week from.
_COHORTS_SQL = """
SELECT value, week, sum(installs) AS users, sum(active_users) AS active_users, sum(net_revenue) AS net_revenue
FROM cohort_curves
WHERE workspace_id = $workspace AND dimension = $dimension AND cohort_date BETWEEN $start AND $end
GROUP BY value, week
ORDER BY value, week
"""


def _ratio(numerator: float | None, denominator: float | None, digits: int) -> float | None:
    return round(numerator / denominator, digits) if numerator is not None and denominator else None


def payback_rows(
    cur: duckdb.DuckDBPyConnection, *, workspace_id: str, start: date, end: date, dimension: str, window: int
) -> list[dict[str, Any]]:
    """Spec "Payback report row" per group value, for cohorts installed in [start, end].

    DuckDB sums the cube per (value, day) (a few hundred rows); `payback_summary` does the rest
    (the running sums cost far less in Polars than as SQL windows here: docs/benchmarks.md)."""
    params = {"workspace": workspace_id, "dimension": dimension, "start": start, "end": end}
    daily = cur.sql(_DAILY_SQL, params={**params, "window": window, "roas_days": ROAS_DAYS}).pl()
    ltv = dict(cur.execute(_LTV_SQL, {"workspace": workspace_id, "dimension": dimension}).fetchall())
    # A few hundred rows: the in-memory engine starts faster than the streaming one (docs/benchmarks.md).
    summary = payback_summary(daily.lazy().cast(DAILY_SUMS_SCHEMA), window).collect(engine="in-memory")
    out = []
    for row in summary.iter_rows(named=True):
        spend, installs, trials = row["spend"], row["installs"], row["trials"]
        out.append(
            {
                "cohort": row["value"],
                "spend": round(spend, 2),
                "cac": _ratio(spend, installs, 2),
                "trials": int(trials),
                "trial_conversion_rate": _ratio(row["trial_conversions"], trials, 4) or 0.0,
                "subscriptions": int(row["subscriptions"]),
                "roas_30d": _ratio(row["revenue_30d"], spend, 4),
                "payback_days": row["payback_day"],
                "ltv_projected": round(ltv.get(row["value"]) or 0.0, 2),
            }
        )
    return out


def cohort_curves(
    cur: duckdb.DuckDBPyConnection, *, workspace_id: str, start: date, end: date, dimension: str
) -> list[dict[str, Any]]:
    """Spec "Cohort curve" per group value for the cohorts installed in [start, end], each week
    estimated over the users whose week is complete (`transforms.reports.curves.chain_ladder`).
    A group with no week estimated from enough users is left out."""
    rows = cur.execute(
        _COHORTS_SQL, {"workspace": workspace_id, "dimension": dimension, "start": start, "end": end}
    ).fetchall()
    sums: dict[str, list[WeekSums]] = {}
    for value, week, users, active, revenue in rows:
        sums.setdefault(value, []).append(WeekSums(int(week), int(users), int(active), float(revenue)))
    curves = []
    for label, weeks in sums.items():
        points = chain_ladder(weeks)
        if points:
            curves.append(
                {
                    "label": label,
                    "weeks": [
                        {
                            "week": p.week,
                            "retained_pct": round(p.retained_pct, 4),
                            "cumulative_revenue": round(p.cumulative_revenue, 2),
                            "users": p.users,
                        }
                        for p in points
                    ],
                }
            )
    return curves
