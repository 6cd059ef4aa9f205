"""RevenueCat sync pacing: one reconciliation against a fake that enforces the rate limit.

RevenueCat allows 480 requests a minute per project on the Customer Information endpoints and
has no "changed since" listing, so a sync walks every customer (design/integrations.md §1.2):
its duration is set by the limit, and the question is how close to the limit's minimum it gets
without being refused. One run of the real connector (client, pacing, mapping, landing into a
SQLite database) against `tests/providers/revenuecat_fake.py`, which counts every accepted
request over a rolling 60-second window and answers 429 with `backoff_ms` beyond the limit.

Reported: duration, requests, the 429s answered, the longest run of consecutive 429s (target: at
most one in a row) and the duration against the minimum the limit allows for those requests
(requests / per_minute, the even-pacing minimum; target within 10 %). Baseline, measured in the
same run: the same connector with pacing off on a sample of customers against a fresh fake with
the same limit (how many 429s a bursting client collects while honouring every `backoff_ms`).

The default run (20 000 customers at 480/min) takes well over an hour, almost all of it spent
waiting for the limit; a scaled run with the same ratio of customers to limit
(`--customers 2000 --per-minute 4800`) checks the same thing in about a minute.

    python -m tests.bench.sync_pacing [--customers N] [--per-minute L] [--sample N]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

from clients.subscription_provider_a import RevenueCatClient
from orchestration.syncs.connectors.subscription_provider_a import CONNECTOR
from tests.providers.revenuecat_fake import ANCHOR, FakeRevenueCat, Stats
from transforms.integrations.kinds import validate_config
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import Database
from warehouse.integrations.target import SyncTarget
from warehouse.lake import Lake, LocalLake

TYPE = "subscription_provider_a"
# Pacing "off": a rate no fake limit here comes near, so only the 429s slow the client down.
UNPACED = 1_000_000


def _sync(client: RevenueCatClient, db: Database, lake: Lake, workspace: str) -> tuple[float, SyncTarget]:
    target = SyncTarget(db, lake, workspace, "int_bench", TYPE, now=ANCHOR + timedelta(hours=1))
    config = validate_config(
        TYPE, {"api_key": client.api_key, "project_id": client.project_id, "base_url": client.base_url}
    )
    started = time.monotonic()
    CONNECTOR.sync(client, target, config, lambda _line: None)
    return time.monotonic() - started, target


def _progress(fake: FakeRevenueCat, done: threading.Event, every_s: float) -> None:
    started = time.monotonic()
    while not done.wait(every_s):
        s = fake.stats
        print(
            f"  ... {time.monotonic() - started:6.0f} s: {s.requests} requests, {s.rate_limited} answered 429",
            flush=True,
        )


def _client(fake: FakeRevenueCat, per_minute: int) -> RevenueCatClient:
    return RevenueCatClient(
        base_url=fake.url, api_key=fake.api_key, project_id=fake.project_id, requests_per_minute=per_minute
    )


def _line(label: str, seconds: float, stats: Stats) -> str:
    return (
        f"{label}: {seconds:8.1f} s, {stats.requests} requests ({stats.accepted} accepted), "
        f"{stats.rate_limited} answered 429, longest run of consecutive 429s {stats.longest_429_run}"
    )


def run(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--per-minute", type=int, default=480, help="the fake's limit and the client's configured rate")
    parser.add_argument(
        "--sample", type=int, default=0, help="customers of the unpaced baseline (default: per-minute / 2)"
    )
    parser.add_argument("--progress-s", type=float, default=60.0, help="print progress this often")
    args = parser.parse_args(argv)
    sample = args.sample or max(20, args.per_minute // 2)

    tmp = Path(tempfile.mkdtemp(prefix="flokit-bench-sync-pacing-"))
    db = Database(f"sqlite:///{tmp / 'flokit.db'}")
    migrate.upgrade(db)
    with db.write() as conn:  # one workspace each, so that the paced run lands its own events
        baseline_ws = bootstrap(conn, name="Bench baseline")["workspace_id"]
        workspace = bootstrap(conn, name="Bench")["workspace_id"]
    print(
        f"sync pacing: {args.customers} customers at {args.per_minute}/min (rolling 60 s window), "
        f"unpaced baseline on {sample} customers; data in {tmp}",
        flush=True,
    )

    with FakeRevenueCat(customers=sample, per_minute=args.per_minute) as fake:
        seconds, _ = _sync(_client(fake, UNPACED), db, LocalLake(tmp / "lake-baseline"), baseline_ws)
        base = fake.stats
    print(_line("baseline  unpaced, sample  ", seconds, base), flush=True)

    with FakeRevenueCat(customers=args.customers, per_minute=args.per_minute) as fake:
        done = threading.Event()
        reporter = threading.Thread(target=_progress, args=(fake, done, args.progress_s), daemon=True)
        reporter.start()
        try:
            seconds, target = _sync(_client(fake, args.per_minute), db, LocalLake(tmp / "lake"), workspace)
        finally:
            done.set()
        stats = fake.stats
    minimum = stats.requests / args.per_minute * 60.0
    burst_minimum = max(0.0, stats.requests - args.per_minute) / args.per_minute * 60.0
    print(_line("paced     connector, all   ", seconds, stats))
    print(
        f"          {target.records} events landed, {stats.requests / max(1, args.customers):.2f} requests a customer"
    )
    print(
        f"minimum   requests / per_minute: {minimum:8.1f} s; duration / minimum = {seconds / minimum:.3f} "
        f"(target <= 1.10); a rolling window would allow a first burst of {args.per_minute}: {burst_minimum:.1f} s"
    )
    ok = stats.longest_429_run <= 1 and seconds <= 1.10 * minimum
    print(f"targets   at most one 429 in a row, within 10 % of the minimum: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    run(None)
