"""Live overview benchmark: `python -m tests.bench.subscriptions_overview [--grants 100000] [--database-url URL]`.

1. setup: a migrated database (a temp SQLite file unless `--database-url` names an empty, migrated
   one: `scripts/with-postgres.sh` gives one on PostgreSQL) with one workspace and `--grants`
   active subscriptions bulk-inserted with SQL, as varied as a real catalog: six sources, weekly,
   monthly and yearly plans and some without a named period, prices in USD, EUR, GBP and JPY
   stated on any of the last 90 rated days, one in ten in a free trial; plus as many expired
   grants and promotional grants beside them (what the query must leave out).
   Each grant is counted in the live stock as the ledger's writes count it (`subscription_stock`).
2. measure, in one process, on warm caches: `warehouse.subscriptions.overview.live_stocks` (the
   sweep of the grants whose access ended, the kept counts and the MRR they feed), the same with
   every count's value converted anew (a fresh process, a new rates file or catalog), then
   `GET /v1/subscriptions/overview` through the real Flask app, against the baseline of the same
   run: an authenticated `GET /v1/workspace`.

Printed: p50 and p95 in milliseconds, and the overview's p50 against the issue's 50 ms. Nothing
is asserted: times depend on the machine.
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

CHUNK = 20_000
SAMPLES = 200
SOURCES = ("ios_store", "android_store", "payment_processor", "subscription_provider_a", "generic-subscription")
PLANS = (("pro_weekly", "P1W", 7, 4.99), ("pro_monthly", "P1M", 30, 9.99), ("pro_yearly", "P1Y", 365, 59.99))
CURRENCIES = (("USD", 1.0), ("EUR", 0.92), ("GBP", 0.79), ("JPY", 150.0))


def _rows(workspace_id: str, app_id: str, start: int, stop: int, rated_until: datetime) -> list[dict[str, Any]]:
    rng = random.Random(start)
    now = datetime.now(UTC)
    rows = []
    for i in range(start, stop):
        source = SOURCES[i % len(SOURCES)]
        product, period, days, usd = PLANS[i % len(PLANS)]
        currency, per_usd = CURRENCIES[i % len(CURRENCIES)]
        priced = rated_until - timedelta(days=rng.randrange(90), seconds=rng.randrange(86_400))
        expires = now + timedelta(days=1 + rng.randrange(days))
        kind = "expired" if i % 3 == 2 else "promotional" if i % 11 == 0 else "active"
        if kind == "expired":
            expires = now - timedelta(days=1 + rng.randrange(30))
        rows.append({
            "id": f"grt_bench{i:09d}", "workspace_id": workspace_id, "app_id": app_id,
            "source": "promotional" if kind == "promotional" else source, "store_key": f"key-{i}",
            "user_id": f"user-{i}", "product_id": product, "kind": "subscription",
            "channel": "promotional" if kind == "promotional" else "iap", "environment": "production",
            "expires_at": expires, "access_ends_at": expires, "in_trial": i % 10 == 1, "auto_renew": True,
            "stated_at": priced, "created_at": priced, "updated_at": priced,
            "price_amount": None if kind == "promotional" else round(usd * per_usd, 2),
            "price_currency": None if kind == "promotional" else currency,
            "priced_at": None if kind == "promotional" else priced,
            "billing_period": period if i % 7 else None,  # some sources name none: the length decides
        })  # fmt: skip
    return rows


def _counted(rows: list[dict[str, Any]], counts: dict[str, tuple[Any, int]], now: datetime) -> None:
    """Mark each row with the stock key it counts under, as the ledger's writes would
    (`warehouse.subscriptions.stock.recount`, with the same pure rule), and add it to `counts`."""
    from transforms.subscriptions.stock import counted_until, stock_entry

    for row in rows:
        entry = stock_entry(**{k: row[k] for k in (
            "source", "kind", "environment", "in_trial", "price_amount", "price_currency", "priced_at",
            "billing_period", "product_id", "expires_at")})  # fmt: skip
        until = counted_until(row["access_ends_at"], None)
        counts_now = entry is not None and until is not None and until > now
        row["stock_key"] = entry.key if counts_now and entry else None
        row["stock_ends_at"] = until if counts_now else None
        if counts_now and entry is not None:
            counts[entry.key] = (entry, counts.get(entry.key, (entry, 0))[1] + 1)


def setup(database_url: str, grants: int, rated_until: datetime) -> tuple[Any, dict[str, Any], int, float]:
    """The database, its workspace, how many grants it holds, and the seconds taken. The grants
    are inserted with SQL, each counted in the live stock as the ledger would count it."""
    from warehouse import migrate
    from warehouse.bootstrap import bootstrap
    from warehouse.db import database_for
    from warehouse.entitlements.tables import entitlement_grants, subscription_stock

    db = database_for(database_url)
    migrate.upgrade(db)
    with db.write() as conn:
        workspace = bootstrap(conn, name="Bench")
    # Rows until `grants` of them are active paid or trial ones (one in three is expired, one in
    # eleven promotional).
    t0 = time.perf_counter()
    active = total = 0
    counts: dict[str, tuple[Any, int]] = {}
    while active < grants:
        start, total = total, total + CHUNK
        rows = _rows(workspace["workspace_id"], workspace["app_id"], start, total, rated_until)
        _counted(rows, counts, datetime.now(UTC))
        active += sum(r["access_ends_at"] > datetime.now(UTC) and r["source"] != "promotional" for r in rows)
        with db.write() as conn:
            conn.execute(entitlement_grants.insert(), rows)
    with db.write() as conn:
        conn.execute(subscription_stock.insert(), [
            {"workspace_id": workspace["workspace_id"], "stock_key": key, "in_trial": e.in_trial,
             "price_amount": e.price_amount, "price_currency": e.price_currency, "priced_day": e.priced_day,
             "period": e.period, "product_id": e.product_id, "subscriptions": n}
            for key, (e, n) in counts.items()
        ])  # fmt: skip
        conn.exec_driver_sql("ANALYZE")
    return db, workspace, total, time.perf_counter() - t0


def _timed(call: Callable[[], Any]) -> tuple[float, float]:
    for _ in range(10):  # warm: pool, statement caches, pages, the rates
        call()
    times = []
    for _ in range(SAMPLES):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95)]


def measure(db: Any, workspace: dict[str, Any], data_dir: Path, database_url: str) -> dict[str, Any]:
    from api.app import create_app
    from warehouse import fx
    from warehouse.settings import Settings
    from warehouse.subscriptions import overview
    from warehouse.subscriptions.inputs import catalog_frame
    from warehouse.subscriptions.overview import live_stocks

    settings = Settings(data_dir=data_dir, database_url=database_url, rate_limit_api_key="1000000/second")
    rates = fx.load_rates(settings.paths)
    ws = workspace["workspace_id"]
    results: dict[str, Any] = {}
    with db.read() as conn:
        catalog = catalog_frame(conn, ws)

    def stocks() -> Any:
        return live_stocks(db, ws, datetime.now(UTC), catalog=catalog, rates=rates, reporting="USD")

    def cold() -> Any:
        overview._values.clear()  # as in a fresh process, or after a new rates file or catalog
        return live_stocks(db, ws, datetime.now(UTC), catalog=catalog, rates=rates, reporting="USD")

    results["figures"] = stocks()
    results["stocks"] = _timed(stocks)
    results["cold"] = _timed(cold)
    client = create_app(settings).test_client()
    auth = {"Authorization": f"Bearer {workspace['api_key_read_only']}"}

    def get(path: str) -> Callable[[], None]:
        def call() -> None:
            response = client.get(path, headers=auth)
            assert response.status_code == 200, response.json

        return call

    results["http_overview"] = _timed(get("/v1/subscriptions/overview"))
    results["http_baseline"] = _timed(get("/v1/workspace"))
    return results


def main(argv: list[str] | None = None) -> int:
    from tests.support.money import RATES

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grants", type=int, default=100_000, help="active subscriptions (paid and trials)")
    parser.add_argument("--database-url", help="an empty database (default: a temp SQLite file)")
    args = parser.parse_args(argv)
    rated_until = datetime.combine(RATES["rate_date"].max(), datetime.min.time(), tzinfo=UTC)
    root = Path(tempfile.mkdtemp(prefix="flokit-bench-overview-"))
    url = args.database_url or f"sqlite:///{root / 'flokit.db'}"
    print(f"subscription overview benchmark: {args.grants:,} active grants on {url.split(':', 1)[0]}", flush=True)
    try:
        db, workspace, total, seconds = setup(url, args.grants, rated_until)
        print(f"setup: {total:,} grants inserted in {seconds:.1f} s", flush=True)
        r = measure(db, workspace, root / "data", url)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    f = r["figures"]
    print(
        f"figures                 {f.active_subscriptions:,} active, {f.active_trials:,} trials, MRR {f.mrr:,.2f} USD"
    )
    for label, name in (
        ("live stocks (warehouse)", "stocks"),
        ("live stocks, every key new", "cold"),
        ("overview over HTTP", "http_overview"),
        ("baseline: GET /v1/workspace", "http_baseline"),
    ):
        p50, p95 = r[name]
        print(f"{label:<30} p50 {p50:7.3f} ms   p95 {p95:7.3f} ms")
    p50 = r["http_overview"][0]
    print(f"overview p50 over HTTP {p50:.2f} ms: {'under' if p50 < 50 else 'OVER'} the issue's 50 ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
