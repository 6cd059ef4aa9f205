"""Customer search benchmark: `python -m tests.bench.customer_search [--customers 1000000] [--database-url URL]`.

1. setup: a migrated database (a temp SQLite file unless `--database-url` names an empty, migrated
   one: `scripts/with-postgres.sh` gives one on PostgreSQL) with one workspace, and `--customers`
   grants bulk-inserted with SQL, one customer each, the id kinds spread over five sources: App
   Store (original and latest transaction ids), Google Play (first and newest tokens), Stripe
   (subscription and customer ids), RevenueCat (an anonymous customer id) and generic purchases.
2. measure, in one process, on warm caches: `warehouse.customers.search` for random ids of every
   kind and for misses, against the baseline of the same run: one probe of the `(app_id, user_id)`
   index (`ledger.grants_of`, what every entitlement read does); then the same over HTTP through
   the real Flask app (`GET /v1/customers?query=`) against an authenticated `GET /v1/workspace`.

Printed: p50 and p95 of each in milliseconds, and the search's p50 against the issue's 20 ms.
Nothing is asserted: times depend on the machine.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

CHUNK = 20_000  # rows per executemany: big enough to amortize, small enough to keep memory flat
SAMPLES = 1_000  # timed lookups per figure
SOURCES = ("ios_store", "android_store", "payment_processor", "subscription_provider_a", "generic-subscription")


def _rows(workspace_id: str, app_id: str, start: int, stop: int) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    rows = []
    for i in range(start, stop):
        source = SOURCES[i % len(SOURCES)]
        key, token, txn, customer = _ids(i)
        rows.append({
            "id": f"grt_bench{i:09d}", "workspace_id": workspace_id, "app_id": app_id, "source": source,
            "store_key": key, "user_id": f"user-{i}", "product_id": "pro_monthly", "kind": "subscription",
            "channel": "web" if source == "payment_processor" else "iap", "environment": "production",
            "expires_at": now + timedelta(days=20), "access_ends_at": now + timedelta(days=20), "in_trial": False,
            "auto_renew": True, "transaction_id": txn, "current_token": token, "customer_id": customer,
            "stated_at": now, "linked_at": now, "created_at": now, "updated_at": now,
        })  # fmt: skip
    return rows


def _ids(i: int) -> tuple[str, str | None, str | None, str | None]:
    """(store_key, current_token, transaction_id, customer_id) of customer i, by its source."""
    source = SOURCES[i % len(SOURCES)]
    if source == "ios_store":
        return str(2_000_000_000_000_000 + i), None, str(3_000_000_000_000_000 + i), None
    if source == "android_store":
        return f"tok-{i:012d}-first", f"tok-{i:012d}-new", f"GPA.{i:04d}-0000", None
    if source == "payment_processor":
        return f"sub_{i:020d}", None, f"in_{i:020d}", f"cus_{i:016d}"
    if source == "subscription_provider_a":
        return f"rc_{i:012d}", None, f"rc_txn_{i:012d}", f"$RCAnonymousID:{i:032x}"
    return f"pur_{i:012d}", None, f"evt_{i:012d}", None


def setup(database_url: str, customers: int) -> tuple[Any, dict[str, Any], float]:
    from warehouse import migrate
    from warehouse.bootstrap import bootstrap
    from warehouse.db import database_for
    from warehouse.entitlements.tables import entitlement_grants

    db = database_for(database_url)
    migrate.upgrade(db)
    with db.write() as conn:
        workspace = bootstrap(conn, name="Bench")
    t0 = time.perf_counter()
    for start in range(0, customers, CHUNK):
        with db.write() as conn:
            conn.execute(
                entitlement_grants.insert(),
                _rows(workspace["workspace_id"], workspace["app_id"], start, min(customers, start + CHUNK)),
            )
    with db.write() as conn:
        conn.exec_driver_sql("ANALYZE")
    return db, workspace, time.perf_counter() - t0


def _queries(customers: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(SAMPLES):
        i = rng.randrange(customers)
        key, token, txn, customer = _ids(i)
        choices = [f"user-{i}", key, txn] + [x for x in (token, customer) if x]
        out.append(rng.choice([c for c in choices if c]))
    out[::10] = [f"missing-{k}" for k in range(len(out[::10]))]  # one in ten finds nobody
    return out


def _timed(call: Callable[[str], Any], inputs: list[str]) -> tuple[float, float]:
    for value in inputs[:50]:  # warm: pool, statement caches, pages
        call(value)
    times = []
    for value in inputs:
        t0 = time.perf_counter()
        call(value)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def measure(db: Any, workspace: dict[str, Any], customers: int, data_dir: Path, database_url: str) -> dict[str, Any]:
    from api.app import create_app
    from warehouse import customers as repo
    from warehouse.entitlements import ledger
    from warehouse.settings import Settings

    rng = random.Random(7)
    queries = _queries(customers, rng)
    users = [f"user-{rng.randrange(customers)}" for _ in range(SAMPLES)]
    ws, app_id = workspace["workspace_id"], workspace["app_id"]
    results: dict[str, Any] = {}
    with db.read() as conn:
        hits = sum(bool(repo.search(conn, workspace_id=ws, query=q)) for q in queries)
        results["search"] = _timed(lambda q: repo.search(conn, workspace_id=ws, query=q), queries)
        results["baseline"] = _timed(lambda u: ledger.grants_of(conn, workspace_id=ws, app_id=app_id, user_id=u), users)
    results["hits"] = hits
    settings = Settings(data_dir=data_dir, database_url=database_url, rate_limit_api_key="1000000/second")
    client = create_app(settings).test_client()
    auth = {"Authorization": f"Bearer {workspace['api_key_read_only']}"}

    def http_search(q: str) -> None:
        response = client.get("/v1/customers", query_string={"query": q}, headers=auth)
        assert response.status_code == 200, response.json

    def http_floor(_q: str) -> None:
        response = client.get("/v1/workspace", headers=auth)
        assert response.status_code == 200, response.json

    results["http_search"] = _timed(http_search, queries)
    results["http_baseline"] = _timed(http_floor, queries)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--customers", type=int, default=1_000_000)
    parser.add_argument("--database-url", help="an empty database (default: a temp SQLite file)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="flokit-bench-search-"))
    url = args.database_url or f"sqlite:///{root / 'flokit.db'}"
    print(f"customer search benchmark: {args.customers:,} customers on {url.split(':', 1)[0]}", flush=True)
    try:
        db, workspace, seconds = setup(url, args.customers)
        print(f"setup: {args.customers:,} grants inserted in {seconds:.1f} s", flush=True)
        r = measure(db, workspace, args.customers, root / "data", url)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"lookups per figure      {SAMPLES} ({r['hits']} found a customer; one in ten is a miss)")
    for label, name in (
        ("search (warehouse)", "search"),
        ("baseline: (app, user) probe", "baseline"),
        ("search over HTTP", "http_search"),
        ("baseline: GET /v1/workspace", "http_baseline"),
    ):
        p50, p95 = r[name]
        print(f"{label:<30} p50 {p50:7.3f} ms   p95 {p95:7.3f} ms")
    p50 = r["http_search"][0]
    print(f"search p50 over HTTP {p50:.2f} ms: {'under' if p50 < 20 else 'OVER'} the issue's 20 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
