"""Signed App Store notifications through the gateway path to the ledger, and receipt verification.

    [scripts/with-postgres.sh] .venv/bin/python -m tests.bench.notifications [--count 2000]
        [--connections 8] [--backends sqlite,postgres]

Per backend: a fresh database, a bootstrapped workspace whose app is set up for the test PKI's
bundle id (Production), and gunicorn as `flokit up` configures it (its config file and
`DEFAULT_WORKERS` workers, through `tests/support/__init__.py gunicorn_server`; online checks off: this
machine reaches no OCSP responder). Every notification
is a distinct SUBSCRIBED (its own notificationUUID and purchase), signed beforehand by a root ->
intermediate -> leaf chain with Apple's OIDs (`tests/providers/apple_pki.py`), so the server does
the full work of each: verify the envelope, the transaction and the renewal info with Apple's
library, store the raw notification, apply it to the ledger, land its canonical event.

The client is Python threads on persistent connections (the bodies differ per request, which
`wrk` scripts cannot pre-sign); its own cost is the same for the baseline, `GET /healthz` on the
same server with the same client, measured in the same run. Receipt verification is
`POST /api/paywall/receipt` on one connection (latency, not throughput), against the same
client's `GET /api/paywall/entitlement` (the gateway's hot read).

Printed per backend: notifications/s and p50/p99 (targets: >= 200/s, p50 < 50 ms), the
baseline's, receipt p50/p99 (target p50 < 20 ms); then the ledger and landing are checked: one
grant and one event per notification, every notification stored once and applied.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa

from cli.up import DEFAULT_WORKERS
from tests.bench.ingest import database
from tests.providers.apple_pki import ApplePki, renewal, transaction
from tests.support import free_port, gunicorn_server
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import close_database, database_for
from warehouse.entitlements.notifications import counts
from warehouse.entitlements.stores import StoresUpdate, set_stores
from warehouse.events.tables import landed_events
from warehouse.settings import Settings

TARGET_RPS = 200
TARGET_P50_MS = 50
TARGET_RECEIPT_P50_MS = 20
WARM_UP = 50
INSTANCE_KEY = "bench-instance-key-0123456789abcdefghijklmnop"


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Run:
    count: int
    seconds: float
    latencies_ms: list[float]
    statuses: dict[int, int]

    @property
    def rps(self) -> float:
        return self.count / self.seconds

    def pct(self, p: float) -> float:
        ordered = sorted(self.latencies_ms)
        return round(ordered[min(len(ordered) - 1, int(p * len(ordered)))], 2)

    def summary(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "rps": round(self.rps),
            "p50_ms": self.pct(0.50),
            "p99_ms": self.pct(0.99),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def drive(base: str, requests: Sequence[Request], connections: int) -> Run:
    """Send every request once, `connections` at a time on keep-alive connections."""
    address = urlsplit(base)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    lock = threading.Lock()
    cursor = iter(range(len(requests)))

    def worker() -> None:
        conn = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
        mine: list[float] = []
        codes: dict[int, int] = {}
        while True:
            with lock:
                i = next(cursor, None)
            if i is None:
                break
            r = requests[i]
            for attempt in (1, 2):  # the server may close an idle keep-alive connection
                try:
                    start = time.perf_counter()
                    conn.request(r.method, r.path, body=r.body, headers=dict(r.headers))
                    response = conn.getresponse()
                    response.read()
                    mine.append((time.perf_counter() - start) * 1000)
                    codes[response.status] = codes.get(response.status, 0) + 1
                    break
                except (http.client.HTTPException, ConnectionError):
                    conn.close()
                    conn = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
                    if attempt == 2:
                        raise
        conn.close()
        with lock:
            latencies.extend(mine)
            for code, n in codes.items():
                statuses[code] = statuses.get(code, 0) + n

    threads = [threading.Thread(target=worker) for _ in range(connections)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Run(len(requests), time.perf_counter() - start, latencies, statuses)


def prepare(url: str) -> dict[str, Any]:
    db = database_for(url)
    migrate.upgrade(db)
    with db.write() as conn:
        boot = bootstrap(conn, name="Notifications bench")
        set_stores(
            conn,
            app_id=boot["app_id"],
            update=StoresUpdate(
                ios_bundle_id="com.acme.fit", ios_app_apple_id=1234567890, ios_environment="Production"
            ),
            instance_key=INSTANCE_KEY,
        )
    close_database(url)
    return boot


def notifications(pki: ApplePki, count: int) -> list[Request]:
    json_body = (("Content-Type", "application/json"),)
    out = []
    for i in range(count):
        original = f"{5_000_000_000_000_000 + i}"
        txn = transaction(transactionId=original, originalTransactionId=original)
        signed = pki.notification(
            "SUBSCRIBED", "INITIAL_BUY", txn=txn, renewal_info=renewal(originalTransactionId=original)
        )
        out.append(Request("POST", "/webhooks/ios_store", json.dumps({"signedPayload": signed}).encode(), json_body))
    return out


def receipts(pki: ApplePki, count: int, app_key: str) -> list[Request]:
    out = []
    for i in range(count):
        original = f"{6_000_000_000_000_000 + i}"
        jws = pki.transaction(transactionId=original, originalTransactionId=original)
        body = json.dumps({"provider": "ios_store", "signedTransactionInfo": jws}).encode()
        headers = (("Content-Type", "application/json"), ("x-user-id", f"buyer-{i}"), ("x-app-key", app_key))
        out.append(Request("POST", "/api/paywall/receipt", body, headers))
    return out


def check(url: str, boot: dict[str, Any], notified: int, shown: int) -> dict[str, Any]:
    """One stored, applied notification per notification sent; one event per purchase."""
    db = database_for(url)
    with db.read() as conn:
        stored = counts(conn, workspace_id=boot["workspace_id"]).get("ios_store", {})
        events = int(conn.execute(sa.select(sa.func.count()).select_from(landed_events)).scalar_one())
    close_database(url)
    return {
        "stored": stored,
        "events_landed": events,
        "ok": stored == {"applied": notified} and events == notified + shown,
    }


def bench(backend: str, count: int, connections: int, work: Path) -> dict[str, Any]:
    data_dir = work / backend
    data_dir.mkdir()
    pki = ApplePki(work / f"{backend}-pki")
    receipt_count = max(200, count // 10)
    with database(backend, data_dir) as url:
        boot = prepare(url)
        settings = Settings(
            data_dir=data_dir,
            database_url=url,
            surfaces=("gateway",),
            api_port=free_port(),
            apple_root_certs=(pki.root_path,),
            apple_online_checks=False,
            instance_key=INSTANCE_KEY,
            rate_limit_app_client="1000000/second",
            rate_limit_address="1000000/second",
        )
        signing = time.perf_counter()
        everything = notifications(pki, count + WARM_UP)
        warm_up, load = everything[:WARM_UP], everything[WARM_UP:]
        shown = receipts(pki, receipt_count, boot["app_key"])
        signed_s = time.perf_counter() - signing
        env = {**os.environ, **settings.child_env()}
        read = Request("GET", "/api/paywall/entitlement", headers=(("x-user-id", "u"), ("x-app-key", boot["app_key"])))
        with gunicorn_server(env, workers=DEFAULT_WORKERS, log_dir=work) as server:
            drive(server.base, [Request("GET", "/healthz")] * 200 + warm_up, connections)  # workers warm
            ceiling = drive(server.base, [Request("GET", "/healthz")] * count, connections)
            processed = drive(server.base, load, connections)
            reads = drive(server.base, [read] * receipt_count, 1)
            verified = drive(server.base, shown, 1)
        ledger = check(url, boot, count + WARM_UP, receipt_count)
    return {
        "backend": backend,
        "signed_beforehand_s": round(signed_s, 1),
        "healthz": ceiling.summary(),
        "notifications": processed.summary() | {"share_of_healthz": round(processed.rps / ceiling.rps, 3)},
        "entitlement_read_1conn": reads.summary(),
        "receipts_1conn": verified.summary(),
        "ledger": ledger,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=2000, help="notifications per backend")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args(argv)
    failed = False
    with tempfile.TemporaryDirectory(prefix="flokit-notifications-bench-") as tmp:
        for backend in args.backends.split(","):
            result = bench(backend, args.count, args.connections, Path(tmp))
            print(json.dumps(result), flush=True)
            n = result["notifications"]
            failed |= n["statuses"] != {"200": args.count} or result["receipts_1conn"]["statuses"].keys() != {"200"}
            failed |= not result["ledger"]["ok"]
            print(
                f"{backend}: {n['rps']} notifications/s (target >= {TARGET_RPS}), p50 {n['p50_ms']} ms "
                f"(target < {TARGET_P50_MS}); receipt p50 {result['receipts_1conn']['p50_ms']} ms "
                f"(target < {TARGET_RECEIPT_P50_MS})",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
