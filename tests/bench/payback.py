"""Payback benchmark: `python -m tests.bench.payback [--users 1000000 --days 180]`.

1. generate: a seeded demo history (about 10 events per user) straight into a temp lake's
   `canonical_events` partitions, plus `spend_raw`; the last day is held out.
2. polars: the payback cube from the raw lake in Polars (the transforms the assets use).
3. duckdb: the same cube in hand-written DuckDB SQL (tests/bench/payback_sql.py), the baseline.
4. compare: do the two tables agree (same keys, measures equal to 1e-6)?
5. full: the real Dagster refresh of every report asset (all days, then tables, then publish).
6. incremental: the held-out day arrives; the six-hourly refresh (one day) runs.
7. late: one valid install dated LAKE_START (2024-01-01), a late callback for a new user, lands
   in its `canonical_events` day as the pipeline writes it, and the current day's file is
   rewritten as in `incremental`; the refresh runs (those days and what depends on them, not
   every day since: target at most 2x the incremental refresh).
8. endpoint: GET /v1/reports/payback p50/p95 against the published store.

The refreshes run on a SQLite Dagster instance in the work directory (the development
instance's storage), not an in-memory one: the event log's cost per partition is part of what
a refresh costs.

Each phase runs in its own process so that its peak memory (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any

START = date(2026, 1, 1)
WORKSPACE = "ws_benchpayback"


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# tests/bench/scale.py runs these phases again with the lake in an object store.
LAKE_URL_ENV = "FLOKIT_BENCH_LAKE_URL"


def _lake(root: Path) -> Any:
    from warehouse.paths import DataPaths

    return DataPaths(root, os.environ.get(LAKE_URL_ENV, "")).lake()


def phase_generate(root: Path, users: int, days: int, seed: int) -> dict[str, Any]:
    import polars as pl

    from transforms.demo import DemoConfig, generate
    from warehouse.reports import demo, report_lake

    t0 = time.perf_counter()
    data = generate(DemoConfig(WORKSPACE, users, days, seed, START))
    generated = time.perf_counter() - t0
    last = START + timedelta(days=days - 1)
    day = pl.col("occurred_at").dt.date()
    lake = _lake(root)
    demo.write_event_partitions(lake, data.events.filter(day < last))
    data.events.filter(day == last).write_parquet(root / "held_out.parquet")
    report_lake.write_spend_raw(lake, data.spend)
    return {
        "events": data.events.height,
        "held_out_events": data.events.filter(day == last).height,
        "spend_rows": data.spend.height,
        "generate_s": round(generated, 2),
        "write_s": round(time.perf_counter() - t0 - generated, 2),
    }


def phase_polars(root: Path) -> dict[str, Any]:
    from tests.support.money import RATES, reporting
    from transforms.reports import lifecycle, payback
    from warehouse.reports import report_lake

    lake = _lake(root)
    t0 = time.perf_counter()
    # The lake is read once (the columns the transforms use); like the assets, the parsed events
    # and the user cohorts are materialized once, then reused.
    events = lifecycle.report_events(report_lake.scan_days(lake, report_lake.CANONICAL_EVENTS)).collect().lazy()
    subscription = lifecycle.subscription_events(events, RATES, reporting(WORKSPACE)).collect().lazy()
    cohorts = lifecycle.user_cohorts(lifecycle.acquisitions(events).lazy()).lazy()
    spend = lifecycle.clean_spend(report_lake.scan_days(lake, report_lake.SPEND_RAW), RATES, reporting(WORKSPACE))
    cube = payback.payback_cube(cohorts, subscription, spend).collect()
    elapsed = time.perf_counter() - t0
    cube.write_parquet(root / "polars_cube.parquet")
    return {"seconds": round(elapsed, 2), "rows": cube.height}


def phase_duckdb(root: Path) -> dict[str, Any]:
    import duckdb
    import polars as pl

    from tests.bench.payback_sql import PAYBACK_SQL
    from warehouse.reports import report_lake

    lake = _lake(root)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")  # CAST(timestamptz AS DATE) follows the session zone
    params = {"events": lake.glob(report_lake.CANONICAL_EVENTS), "spend": lake.glob(report_lake.SPEND_RAW)}
    t0 = time.perf_counter()
    cube = con.execute(PAYBACK_SQL, params).to_arrow_table()  # materialized in full, like the Polars side
    elapsed = time.perf_counter() - t0
    pl.from_arrow(cube).write_parquet(root / "duckdb_cube.parquet")  # type: ignore[union-attr]
    return {"seconds": round(elapsed, 2), "rows": cube.num_rows}


def phase_compare(root: Path) -> dict[str, Any]:
    import polars as pl

    from transforms.reports.schemas import MEASURES, PAYBACK_KEY, PAYBACK_SCHEMA

    key = list(PAYBACK_KEY)
    a = pl.read_parquet(root / "polars_cube.parquet").sort(key)
    b = pl.read_parquet(root / "duckdb_cube.parquet").cast(PAYBACK_SCHEMA).select(list(PAYBACK_SCHEMA)).sort(key)  # type: ignore[arg-type]
    same_keys = a.height == b.height and a.select(key).equals(b.select(key))
    worst = 0.0
    if same_keys:
        for column in [*MEASURES, "cumulative_revenue", "cumulative_net_revenue"]:
            diff = (a[column].cast(pl.Float64) - b[column].cast(pl.Float64)).abs().max()
            worst = max(worst, float(diff or 0.0))
    return {"polars_rows": a.height, "duckdb_rows": b.height, "same_keys": same_keys, "max_abs_diff": worst}


def _refresh(root: Path) -> tuple[float, bool, dict[str, int]]:
    """Seconds, success, and the days recomputed per daily dataset (summed over the runs)."""
    import dagster as dg

    from orchestration.definitions import build_definitions
    from orchestration.refresh import QUIET
    from orchestration.reports.jobs import refresh_reports
    from tests.support.money import reports_database
    from warehouse.settings import Settings

    # The report assets read each workspace's reporting currency from the operational database.
    settings = Settings(
        data_dir=root, database_url=reports_database(root, WORKSPACE), lake_url=os.environ.get(LAKE_URL_ENV, "")
    )
    definitions = build_definitions(settings)
    (root / "dagster").mkdir(exist_ok=True)
    with dg.DagsterInstance.local_temp(str(root / "dagster")) as instance:
        before = {run.run_id for run in instance.get_runs()}
        t0 = time.perf_counter()
        result = refresh_reports(definitions, instance, _lake(root), run_config=QUIET)  # as `flokit refresh`
        seconds = time.perf_counter() - t0
        # A range run records one materialization per partition, all with the run's metadata.
        recomputed: dict[tuple[str, str], int] = {}
        for run in instance.get_runs():
            if run.run_id in before:
                continue
            for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
                materialization = entry.asset_materialization
                if materialization and "days" in materialization.metadata:
                    recomputed[(run.run_id, materialization.asset_key.to_user_string())] = int(
                        materialization.metadata["days"].value  # type: ignore[arg-type]
                    )
        days: dict[str, int] = {}
        for (_, asset), value in recomputed.items():
            days[asset] = days.get(asset, 0) + value
        return seconds, bool(result and result.success), days


def phase_full(root: Path) -> dict[str, Any]:
    seconds, ok, _ = _refresh(root)
    return {"seconds": round(seconds, 2), "success": ok}


def phase_incremental(root: Path) -> dict[str, Any]:
    import polars as pl

    from warehouse.reports import demo, report_lake

    lake = _lake(root)
    demo.write_event_partitions(lake, pl.read_parquet(root / "held_out.parquet"))
    stale = report_lake.stale_days(lake)
    seconds, ok, days = _refresh(root)
    return {"seconds": round(seconds, 2), "success": ok, "days_refreshed": [d.isoformat() for d in stale], "days": days}


LATE_USER = "bench_late_user"


def phase_late(root: Path) -> dict[str, Any]:
    """A late callback: the install of a user unseen so far, dated the first day the lake holds
    (2024-01-01, two years before the bench's history), shaped like the history's installs."""
    from datetime import UTC, datetime

    import polars as pl

    from transforms.events import LAKE_START
    from warehouse.reports import demo, report_lake

    lake = _lake(root)
    installs = report_lake.scan_days(lake, report_lake.CANONICAL_EVENTS).filter(pl.col("event_type") == "install")
    occurred = datetime(LAKE_START.year, LAKE_START.month, LAKE_START.day, 12, tzinfo=UTC)
    day = report_lake.scan_days(lake, report_lake.CANONICAL_EVENTS, [LAKE_START]).collect()  # empty but on a rerun
    event = (
        installs.head(1)
        .collect()
        .with_columns(
            pl.lit(f"evt_bench_late_{day.height}").alias("event_id"),
            pl.lit(f"{LATE_USER}_{day.height}").alias("user_id"),
            pl.lit(occurred).cast(pl.Datetime("us", "UTC")).alias("occurred_at"),
        )
    )
    demo.write_event_partitions(lake, pl.concat([day, event]))  # the day's file, as the pipeline writes it
    # Beside it, the six-hourly case it arrives in: the current day's file is rewritten too.
    demo.write_event_partitions(lake, pl.read_parquet(root / "held_out.parquet"))
    stale = report_lake.stale_days(lake)
    seconds, ok, days = _refresh(root)
    cube = (
        report_lake.scan_table(lake, report_lake.PAYBACK)
        .filter((pl.col("cohort_date") == LAKE_START) & (pl.col("dimension") == "campaign"))
        .collect()
    )
    return {
        "seconds": round(seconds, 2),
        "success": ok,
        "day": LAKE_START.isoformat(),
        "days_refreshed": [d.isoformat() for d in stale],
        "days": days,
        "installs_on_the_day": int(cube.filter(pl.col("day") == 0)["installs"].sum() or 0),
    }


def phase_endpoint(root: Path, requests: int, days: int) -> dict[str, Any]:
    from api.app import create_app
    from warehouse import migrate
    from warehouse.db import database_for, utcnow
    from warehouse.settings import Settings
    from warehouse.tables import workspaces
    from warehouse.workspaces import create_key

    # The key's rate limit (100/s) would answer the tight loop 429: the latency measured is the query's.
    settings = Settings(data_dir=root, database_url=f"sqlite:///{root / 'api.db'}", rate_limit_api_key="off")
    db = database_for(settings.database_url)
    migrate.upgrade(db)
    with db.write() as conn:
        conn.execute(
            workspaces.insert().values(
                id=WORKSPACE, name="Bench", reporting_currency="USD", timezone="UTC", created_at=utcnow()
            )
        )
        key = create_key(conn, workspace_id=WORKSPACE, scope="read_only").api_key
    client = create_app(settings).test_client()
    headers = {"Authorization": f"Bearer {key}"}
    end = START + timedelta(days=days - 1)
    variants = [
        {"start_date": START.isoformat(), "end_date": end.isoformat(), "group_by": g, "cohort_window_days": w}
        for g in ("campaign", "creative", "country", "offer", "paywall")
        for w in (7, 30, 90, 365)
    ]
    client.get("/v1/reports/payback", query_string=variants[0], headers=headers)  # first use opens DuckDB
    timings = []
    for i in range(requests):
        t0 = time.perf_counter()
        response = client.get("/v1/reports/payback", query_string=variants[i % len(variants)], headers=headers)
        timings.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, response.json
    timings.sort()
    return {
        "requests": requests,
        "p50_ms": round(statistics.median(timings), 2),
        "p95_ms": round(timings[int(len(timings) * 0.95) - 1], 2),
        "rows_last": len(response.json["data"]),
    }


def _run_phase(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    result: dict[str, Any]
    if args.phase == "generate":
        result = phase_generate(root, args.users, args.days, args.seed)
    elif args.phase == "endpoint":
        result = phase_endpoint(root, args.requests, args.days)
    else:
        result = {
            "polars": phase_polars,
            "duckdb": phase_duckdb,
            "compare": phase_compare,
            "full": phase_full,
            "incremental": phase_incremental,
            "late": phase_late,
        }[args.phase](root)
    result["peak_mb"] = round(_peak_mb())
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        _run_phase(args)
        return
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="flokit-bench-"))
    print(f"payback benchmark: {args.users} users, {args.days} days, seed {args.seed}, in {root}")
    results: dict[str, dict[str, Any]] = {}
    try:
        for phase in ("generate", "polars", "duckdb", "compare", "full", "incremental", "late", "endpoint"):
            argv = [sys.executable, "-m", "tests.bench.payback", "--phase", phase, "--dir", str(root)]
            argv += ["--users", str(args.users), "--days", str(args.days), "--seed", str(args.seed)]
            argv += ["--requests", str(args.requests)]
            out = subprocess.run(argv, capture_output=True, text=True, check=False)
            lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode != 0 or not lines:
                print(f"{phase}: FAILED\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
                raise SystemExit(1)
            results[phase] = json.loads(lines[-1].removeprefix("RESULT "))
            print(f"{phase:<12} {results[phase]}", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    polars, duck, full, inc = results["polars"], results["duckdb"], results["full"], results["incremental"]
    print()
    print(f"events                 {results['generate']['events']:,}")
    print(f"payback cube, Polars   {polars['seconds']} s, peak {polars['peak_mb']} MB")
    print(f"payback cube, DuckDB   {duck['seconds']} s, peak {duck['peak_mb']} MB   (baseline)")
    agree = results["compare"]
    print(f"tables agree           {agree['same_keys']} (max abs diff {agree['max_abs_diff']:.2e})")
    print(f"full refresh (Dagster) {full['seconds']} s, peak {full['peak_mb']} MB")
    print(f"incremental, one day   {inc['seconds']} s  -> {full['seconds'] / max(inc['seconds'], 1e-9):.1f}x faster")
    late = results["late"]
    ratio = late["seconds"] / max(inc["seconds"], 1e-9)
    print(f"late event, {late['day']}  {late['seconds']} s  -> {ratio:.2f}x the incremental refresh (target <= 2x)")
    print(f"endpoint p50 / p95     {results['endpoint']['p50_ms']} / {results['endpoint']['p95_ms']} ms")


if __name__ == "__main__":
    main()
