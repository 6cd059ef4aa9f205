"""Integration sync benchmarks: `python -m tests.bench.syncs [SCENARIO] [scenario options]`.

Scenarios (`SCENARIOS`, name -> `run(argv)`); with no name the quick ones (`DEFAULT_SCENARIOS`)
run with their defaults. `revenuecat` (tests/bench/sync_pacing.py) runs only when named: its
documented run, 20 000 customers at 480 requests/min, waits out the rate limit for about 100 min
(`python -m tests.bench.syncs revenuecat --customers 2000 --per-minute 4800` checks it in one).

adjust: one Adjust sync of a large account, `--days 90 --campaigns 50 --creatives 20
--countries 30` (2.7 M spend rows), from the fake Report Service (tests/providers/adjust_fake.py)
served by its own process on 127.0.0.1. Three phases, each in its own process so that its peak
memory (ru_maxrss) is its own:

1. baseline: the same requests (the connector's 3-day chunks) by a client that only fetches
   and parses them (`requests` + `json`): what the HTTP and JSON work alone costs here;
2. sync: the connector (`CONNECTOR.sync`) into a fresh lake and a migrated SQLite database,
   every day written through `SyncTarget.replace_spend`; checked afterwards: the lake holds
   exactly days x campaigns x creatives x countries rows whose spend sums to the report's cost;
3. again: the same window synced a second time (every day already there and unchanged).

Printed: rows/s and peak RSS of each phase, and the sync against its targets (under 60 s and
under 1 GB) and against the baseline (sync time / baseline time). Exit status 1 when a target
or a check is missed.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

TARGET_SECONDS = 60.0
TARGET_RSS_MB = 1024.0
WORKSPACE = "ws_benchsyncs"
# The window ends on this day (the connector's "today"); a fixed day keeps runs comparable.
LAST_DAY = date(2026, 11, 20)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- adjust ------------------------------------------------------------------------------------


def _adjust_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.syncs adjust")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--campaigns", type=int, default=50)
    parser.add_argument("--creatives", type=int, default=20)
    parser.add_argument("--countries", type=int, default=30)
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    parser.add_argument("--phase", choices=("baseline", "sync", "again"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    return parser


def _adjust_config(url: str, days: int) -> Any:
    from tests.providers.adjust_fake import TOKEN
    from transforms.integrations.kinds import validate_config

    return validate_config("attribution_provider_a", {"api_token": TOKEN, "base_url": url, "lookback_days": days})


def _adjust_baseline(args: argparse.Namespace) -> dict[str, Any]:
    """Fetch and parse the connector's requests, nothing else."""
    import requests

    from orchestration.syncs.connectors.attribution_provider_a import REPORT_PATH
    from tests.providers.adjust_fake import TOKEN
    from transforms.integrations import attribution_provider_a as adjust

    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    rows = 0
    started = time.perf_counter()
    for chunk in adjust.chunks(adjust.window(LAST_DAY, args.days)):
        params = adjust.report_params(chunk, currency="USD")
        response = session.get(f"{args.url}/{REPORT_PATH}", params=params, timeout=(5, 300))
        response.raise_for_status()
        rows += len(json.loads(response.content)["rows"])
        del response
    return {"seconds": time.perf_counter() - started, "rows": rows, "rss_mb": _rss_mb()}


def _adjust_sync(args: argparse.Namespace) -> dict[str, Any]:
    import polars as pl

    from orchestration.syncs.connectors.attribution_provider_a import CONNECTOR, client_for
    from warehouse import migrate
    from warehouse.db import database_for
    from warehouse.integrations.target import SyncTarget
    from warehouse.lake import LocalLake
    from warehouse.reports.report_lake import SPEND_RAW, scan_days

    root = Path(args.dir)
    db = database_for(f"sqlite:///{root / 'flokit.db'}")
    if args.phase == "sync":
        migrate.upgrade(db)
    lake = LocalLake(root / "lake")
    config = _adjust_config(args.url, args.days)
    now = datetime(LAST_DAY.year, LAST_DAY.month, LAST_DAY.day, 12, tzinfo=UTC)
    target = SyncTarget(db, lake, WORKSPACE, "int_bench", "attribution_provider_a", now=now)
    started = time.perf_counter()
    CONNECTOR.sync(client_for(config), target, config, lambda _line: None)
    seconds = time.perf_counter() - started
    rss = _rss_mb()
    landed = scan_days(lake, SPEND_RAW).select(pl.len().alias("rows"), pl.col("spend").sum()).collect().row(0)
    return {
        "seconds": seconds,
        "rss_mb": rss,
        "rows": target.state["last_report"]["report_rows"],
        "records": target.records,
        "lake_rows": landed[0],
        "lake_spend": landed[1],
        "report_cost": target.state["last_report"]["cost"],
    }


def _adjust_phase(args: argparse.Namespace) -> None:
    result = _adjust_baseline(args) if args.phase == "baseline" else _adjust_sync(args)
    print(json.dumps(result))


def _run_phase(phase: str, root: Path, url: str, argv: list[str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.bench.syncs", "adjust", *argv]
    command += ["--phase", phase, "--dir", str(root), "--url", url]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"phase {phase} failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_adjust(argv: list[str]) -> int:
    args = _adjust_parser().parse_args(argv)
    if args.phase:
        _adjust_phase(args)
        return 0
    shape = ["--days", str(args.days)]
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="flokit-bench-syncs-"))
    root.mkdir(parents=True, exist_ok=True)
    cells = args.campaigns * args.creatives * args.countries
    expected = args.days * cells
    print(
        f"adjust: {args.days} days x {args.campaigns} campaigns x {args.creatives} creatives x "
        f"{args.countries} countries = {expected:,} spend rows",
        flush=True,
    )
    shape_of_fake = ["--campaigns", str(args.campaigns), "--creatives", str(args.creatives)]
    fake = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.adjust_fake", *shape_of_fake, "--countries", str(args.countries)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        url = fake.stdout.readline().strip()
        results = {phase: _run_phase(phase, root, url, shape) for phase in ("baseline", "sync", "again")}
    finally:
        fake.terminate()
        fake.wait(timeout=10)
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    for phase, r in results.items():
        print(
            f"  {phase:<8} {r['seconds']:7.2f} s  {r['rows'] / r['seconds']:>10,.0f} rows/s  "
            f"peak RSS {r['rss_mb']:7.1f} MB",
            flush=True,
        )
    sync = results["sync"]
    ratio = sync["seconds"] / results["baseline"]["seconds"]
    print(f"  sync / baseline (fetch + parse only): {ratio:.2f}x")
    checks = {
        f"sync under {TARGET_SECONDS:.0f} s": sync["seconds"] < TARGET_SECONDS,
        f"sync peak RSS under {TARGET_RSS_MB:.0f} MB": sync["rss_mb"] < TARGET_RSS_MB,
        "every report row fetched (baseline and sync)": results["baseline"]["rows"] == sync["rows"] == expected,
        "lake holds exactly the rows": sync["lake_rows"] == sync["records"] == expected,
        "lake spend == report cost": abs(sync["lake_spend"] - sync["report_cost"])
        < 1e-6 * max(1.0, sync["report_cost"]),
        "again: same lake": results["again"]["lake_rows"] == expected
        and results["again"]["lake_spend"] == sync["lake_spend"],
    }
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}")
    return 0 if all(checks.values()) else 1


def run_revenuecat(argv: list[str]) -> int | None:
    """One RevenueCat reconciliation paced under the rate limit a fake enforces
    (tests/bench/sync_pacing.py; its defaults, 20 000 customers at 480/min, take about 100 min)."""
    from tests.bench import sync_pacing

    sync_pacing.run(argv)
    return None


# Another scenario is a function taking its own argv (`run(argv)`) added here.
SCENARIOS: dict[str, Callable[[list[str]], int | None]] = {
    "adjust": run_adjust,
    "revenuecat": run_revenuecat,
}
# What runs with no scenario named (`make bench`): the RevenueCat scenario's documented run is
# mostly waiting out the rate limit for 100 minutes, so it runs only when asked for by name.
DEFAULT_SCENARIOS = ("adjust",)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SCENARIOS:
        return int(SCENARIOS[argv[0]](argv[1:]) or 0)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv:
        print(f"unknown scenario {argv[0]!r}; one of {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    status = 0
    for name in DEFAULT_SCENARIOS:
        print(f"## {name}", flush=True)
        status |= int(SCENARIOS[name]([]) or 0)
    return status


if __name__ == "__main__":
    sys.exit(main())
