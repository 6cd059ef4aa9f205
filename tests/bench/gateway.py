"""Gateway hot path (paywall config and entitlement reads) against the stack's own ceiling.

    scripts/with-postgres.sh .venv/bin/python -m tests.bench.gateway [--duration 24] [--backends sqlite,postgres]

Per backend: a fresh database, a bootstrapped workspace, a published two-variant paywall
(`onboarding`) with a running experiment for the audience `country: DE` (5 % holdout; every request
says `x-country: DE`, so each config read evaluates the audience and serves the user's exposure,
recorded on its first read), the same paywall as `plain` without one (`config_plain`, the
config read as it was before experiments) and 2 000 users with a purchase in the ledger (a third
active, the rest lapsed);
gunicorn started exactly as `flokit up` starts it, serving only the gateway surface; then `wrk`
(16 connections) alternates slices of GET /healthz (the ceiling: the same server answering without any work,
asked with the reads' own scripted requests and headers; the bare /healthz too), GET
/api/paywall/config and GET /api/paywall/entitlement, each with a different user per request, and the
same entitlement read signed (`entitlement_signed`: its own Lua adds a fixed `x-nonce`, issue 36;
the root key is created as `flokit db upgrade` creates it).
Printed: req/s, p50/p99 and each read's share of the ceiling (and of the bare one); every answer must be a 200.
The entitlement read's per-worker cache of ledger rows (`warehouse/entitlements/cache.py`) starts
empty: the `entitlement` series is measured after a warm-up of 4 reads per user and worker (each
worker has then seen about 98 % of the 2 000 users), and `entitlement_first_sight` asks on every
request for a user no worker has seen (each read a database read). Before this split the series
started cold, and how many of its reads missed depended on how fast the host served: that made its
PostgreSQL share depend on the machine (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cli.up import DEFAULT_WORKERS
from tests.bench.ingest import SLICES, Load, combine, database, ensure_wrk, gunicorn, run_wrk
from tests.support import free_port
from tests.support.paywalls import document
from transforms.entitlements.facts import StoreFact
from transforms.experiments.assignment import Weighted
from warehouse import migrate
from warehouse.bootstrap import bootstrap
from warehouse.db import close_database, database_for
from warehouse.entitlements import ledger
from warehouse.experiments import repository as experiments
from warehouse.paywalls import configs
from warehouse.settings import INSTANCE_KEY_FILE, Settings
from warehouse.signing import keys as signing_keys

USERS = 2000
LUA = r"""
local threads = {}
function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end
function init(args) n = FIRST_SIGHT and os.time() * 1000000 or 0 end  -- first sight: never a user of an earlier slice
function request()
  n = n + 1
  local user = string.format("user-%d", (n * 7 + id * 13) % USERS)
  if FIRST_SIGHT then user = string.format("first-%d-%d", id, n) end
  local headers = {["x-user-id"] = user, ["x-app-key"] = APP_KEY, ["x-country"] = "DE"}
  if NONCE ~= "" then headers["x-nonce"] = NONCE end
  return wrk.format("GET", PATH, headers)
end
"""
# The signed read's nonce: fixed, since the bench measures the signing, not the client's randomness.
BENCH_NONCE = "AAECAwQFBgcICQoLDA0ODw=="
# Reads before the `entitlement` series is measured: users x workers x 4, so that each worker has
# seen about 98 % of the users (1 - e^-4, reads spread evenly), however fast the host serves them.
WARM_UP_READS_PER_USER = 4


def script(work: Path, name: str, path: str, app_key: str, nonce: str = "", first_sight: bool = False) -> Path:
    file = work / f"{name}.lua"
    flags = f'NONCE = "{nonce}"\nFIRST_SIGHT = {"true" if first_sight else "false"}\n'
    file.write_text(f'USERS = {USERS}\nAPP_KEY = "{app_key}"\nPATH = "{path}"\n' + flags + LUA)
    return file


def prepare(url: str, instance_key: str) -> dict[str, str]:
    db = database_for(url)
    migrate.upgrade(db)
    with db.write() as conn:
        signing_keys.ensure_root(conn, instance_key=instance_key)  # as `flokit db upgrade` does
        boot = bootstrap(conn, name="Gateway bench")
        configs.publish(
            conn, app_id=boot["app_id"], paywall_id="onboarding", document=document([50, 50]), actor="bench"
        )
        configs.publish(  # the same paywall without experiments: the config read as the spec has it
            conn, app_id=boot["app_id"], paywall_id="plain", document=document([50, 50]), actor="bench"
        )
        # A running experiment with an audience (issue 35): every config read evaluates it against the
        # request's context and serves the user's sticky exposure, read (and first written) per worker.
        made = experiments.create(
            conn, workspace_id=boot["workspace_id"], app_id=boot["app_id"], paywall_id="onboarding",
            name="bench", variants=[Weighted("v0", 1), Weighted("v1", 1)], holdout_pct=5.0,
            primary_metric="paid_conversion_rate", audience={"country": ["DE"]}, priority=0, actor="bench",
        )  # fmt: skip
        experiments.transition(conn, boot["workspace_id"], made.id, "start", actor="bench")
        now = datetime.now(UTC)
        for i in range(USERS):  # a third active, the rest lapsed a day ago
            fact = StoreFact(
                source="ios_store",
                store_key=f"{1000000 + i}",
                product_id="pro_yearly",
                kind="subscription",
                channel="iap",
                environment="production",
                stated_at=now - timedelta(days=30),
                expires_at=now + timedelta(days=335 if i % 3 == 0 else -1),
            )
            ledger.apply_receipt(
                conn, workspace_id=boot["workspace_id"], app_id=boot["app_id"], user_id=f"user-{i}", fact=fact
            )
    close_database(url)
    return boot


def bench(backend: str, duration: int, wrk: str, work: Path) -> dict[str, object]:
    data_dir = work / backend
    data_dir.mkdir()
    with database(backend, data_dir) as url:
        instance_key = secrets.token_urlsafe(32)
        (data_dir / INSTANCE_KEY_FILE).write_text(instance_key + "\n")  # the gunicorn workers read it there
        boot = prepare(url, instance_key)
        # wrk is one address sending thousands of requests a second: the per-app-and-address rate
        # is raised out of its reach (the limiter still counts every request).
        settings = Settings(
            data_dir=data_dir,
            database_url=url,
            surfaces=("gateway",),
            api_port=free_port(),
            rate_limit_app_client="1000000/second",
        )
        reads = {
            "config": f"/api/paywall/config?app_id={boot['app_id']}&paywall_id=onboarding",
            "config_plain": f"/api/paywall/config?app_id={boot['app_id']}&paywall_id=plain",
            "entitlement": "/api/paywall/entitlement",
            "entitlement_signed": "/api/paywall/entitlement",
            "entitlement_first_sight": "/api/paywall/entitlement",
        }
        scripts = {
            name: script(
                work,
                name,
                path,
                boot["app_key"],
                BENCH_NONCE if name == "entitlement_signed" else "",
                first_sight=name == "entitlement_first_sight",
            )
            for name, path in reads.items()
        }
        # The ceiling is asked exactly as the reads are: the same Lua request() with the same
        # headers. wrk shares the 2 cores with gunicorn and a scripted request costs it (and
        # gunicorn's header parsing) more than a bare one, which is not the read's work.
        ceiling = script(work, "ceiling", "/healthz", boot["app_key"])
        slices: dict[str, list[Load]] = {"bare": [], "ceiling": [], **{name: [] for name in reads}}
        with gunicorn(settings, work / f"{backend}.log") as (base, _pid):
            run_wrk(wrk, f"{base}/healthz", 2)  # warm-up: workers imported, connections open
            for name, file in scripts.items():
                # The entitlement read's warm-up lets each worker see nearly every user: the series then
                # measures the read of a user its worker has seen, in a state that does not depend on
                # how fast the host serves; `entitlement_first_sight` measures the other case.
                warmed = run_wrk(wrk, base + reads[name].split("?")[0], 2, file).requests
                while name == "entitlement" and warmed < WARM_UP_READS_PER_USER * USERS * DEFAULT_WORKERS:
                    warmed += run_wrk(wrk, base + reads[name].split("?")[0], 8, file).requests
            per_slice = max(duration // (3 * SLICES), 8)
            for _ in range(SLICES):
                slices["bare"].append(run_wrk(wrk, f"{base}/healthz", per_slice))
                slices["ceiling"].append(run_wrk(wrk, f"{base}/healthz", per_slice, ceiling))
                for name, file in scripts.items():
                    slices[name].append(run_wrk(wrk, base + reads[name].split("?")[0], per_slice, file))
    result: dict[str, object] = {"backend": backend}
    ceiling = combine(slices["ceiling"])
    result["healthz"] = {"rps": round(ceiling.rps), "p50_ms": ceiling.p50_ms, "p99_ms": ceiling.p99_ms}
    bare = combine(slices["bare"])
    result["healthz_bare"] = {"rps": round(bare.rps), "p50_ms": bare.p50_ms, "p99_ms": bare.p99_ms}
    for name in reads:
        load = combine(slices[name])
        ratios = [x.rps / c.rps for x, c in zip(slices[name], slices["ceiling"], strict=True)]
        result[name] = {
            "rps": round(load.rps),
            "p50_ms": load.p50_ms,
            "p99_ms": load.p99_ms,
            "share_of_ceiling": round(sorted(ratios)[len(ratios) // 2], 3),
            "share_of_bare": round(load.rps / bare.rps, 3),
            "non_2xx": load.outcomes.get("non_2xx", 0),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=24, help="seconds of load per read, in slices")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args(argv)
    wrk = ensure_wrk()
    failed = False
    with tempfile.TemporaryDirectory(prefix="flokit-gateway-bench-") as tmp:
        for backend in args.backends.split(","):
            result = bench(backend, args.duration, wrk, Path(tmp))
            print(json.dumps(result), flush=True)
            failed |= any(
                result[name]["non_2xx"]
                for name in ("config", "config_plain", "entitlement", "entitlement_signed", "entitlement_first_sight")
            )  # type: ignore[index]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
