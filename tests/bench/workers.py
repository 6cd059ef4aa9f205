"""Every surface's throughput under each gunicorn worker class, measured in the same run.

    scripts/with-postgres.sh .venv/bin/python -m tests.bench.workers [--slice 8] [--backends sqlite,postgres]

Per backend: a fresh database with a bootstrapped workspace, a published two-variant paywall,
2 000 users with an entitlement and the ingest mappings; then two gunicorns started as
`flokit up` starts them (same argv, `DEFAULT_WORKERS` workers, all surfaces) on the same
database, one per worker class:

- `sync`: `api.workers.JsonErrorWorker`, gunicorn's sync worker (what FloKit ran before issue 13);
- `edge`: `api.workers.EdgeWorker`, the threaded worker whose event loop reads requests whole.

`wrk` (16 connections) then runs slices of each request below against one server and then the
other, alternating, 3 slices each, so that other work on a shared machine weighs on both alike:

- `healthz`: GET /healthz (no work: the stack's ceiling);
- `v1`: GET /v1/workspace with an API key (key lookup and one read);
- `config`, `entitlement`: the gateway's hot reads, a different user per request;
- `ingest`: attribution callbacks (writes; ~15 % redeliveries, ~10 % unmapped).

Printed: req/s, p50/p99 per request and worker class, and edge / sync. The rate limits run as
shipped (memory), with the per-address and per-app rates raised out of reach: wrk is one
address sending thousands of requests a second, which the defaults would refuse.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from contextlib import ExitStack
from pathlib import Path

from tests.bench.gateway import prepare as prepare_gateway
from tests.bench.gateway import script as gateway_script
from tests.bench.ingest import LUA as INGEST_LUA
from tests.bench.ingest import VENDOR, Load, combine, database, ensure_wrk, gunicorn, run_wrk
from tests.support import free_port
from warehouse.db import close_database, database_for
from warehouse.ingest import repository
from warehouse.settings import Settings

WORKERS = {"sync": "api.workers.JsonErrorWorker", "edge": "api.workers.EdgeWorker"}
SLICES = 3
V1_LUA = r"""
function request() return wrk.format("GET", "/v1/workspace", {["Authorization"] = "Bearer " .. KEY}) end
"""
OUT_OF_REACH = "1000000/second"


def bench(backend: str, slice_s: int, wrk: str, work: Path, threads: int) -> dict[str, object]:
    data_dir = work / backend / "data"
    data_dir.mkdir(parents=True)
    with database(backend, data_dir) as url:
        boot = prepare_gateway(url)
        db = database_for(url)
        with db.write() as conn:
            for token, kind in [("tr4l01", "trial_start"), ("cnv002", "trial_converted"), ("rnw003", "renewal"),
                                ("prc004", "purchase")]:  # fmt: skip
                repository.set_mapping(
                    conn, workspace_id=boot["workspace_id"], vendor=VENDOR, token=token, event_type=kind
                )
        close_database(url)
        config = f"/api/paywall/config?app_id={boot['app_id']}&paywall_id=onboarding"
        scripts = {
            "config": ("/api/paywall/config", gateway_script(work / backend, "config", config, boot["app_key"])),
            "entitlement": (
                "/api/paywall/entitlement",
                gateway_script(work / backend, "entitlement", "/api/paywall/entitlement", boot["app_key"]),
            ),
        }
        v1 = work / backend / "v1.lua"
        v1.write_text(f'KEY = "{boot["api_key_read_only"]}"\n' + V1_LUA)
        slices: dict[tuple[str, str], list[Load]] = {}
        with ExitStack() as stack:
            bases = {}
            for name, worker_class in WORKERS.items():
                settings = Settings(
                    data_dir=data_dir,
                    database_url=url,
                    api_port=free_port(),
                    worker_threads=threads,
                    rate_limit_app_client=OUT_OF_REACH,
                    rate_limit_address=OUT_OF_REACH,
                    rate_limit_api_key=OUT_OF_REACH,
                    rate_limit_ingest_token=OUT_OF_REACH,
                )
                base, _pid = stack.enter_context(gunicorn(settings, work / backend / f"{name}.log", worker_class))
                bases[name] = base
            for base in bases.values():  # warm-up: workers import, connect, fill caches
                run_wrk(wrk, f"{base}/healthz", 2)
            for i in range(SLICES):
                for n, name in enumerate(WORKERS):
                    # Each server and slice its own ids: callbacks never collide by accident.
                    (work / backend / f"callbacks.{name}.{i}.lua").write_text(
                        f'VENDOR = "{VENDOR}"\nSECRET = "{boot["ingest_secret"]}"\n'
                        f'APP_TOKEN = "{boot["ingest_app_token"]}"\nSLICE = {i * len(WORKERS) + n}\n' + INGEST_LUA
                    )
                requests: dict[str, tuple[str, Path | None]] = {
                    "healthz": ("/healthz", None),
                    "v1": ("/v1/workspace", v1),
                    "config": scripts["config"],
                    "entitlement": scripts["entitlement"],
                    "ingest": ("", None),
                }
                for kind, (path, lua) in requests.items():
                    for name, base in bases.items():
                        file = work / backend / f"callbacks.{name}.{i}.lua" if kind == "ingest" else lua
                        slices.setdefault((kind, name), []).append(run_wrk(wrk, base + path, slice_s, file))
    result: dict[str, object] = {"backend": backend}
    for kind in ("healthz", "v1", "config", "entitlement", "ingest"):
        row: dict[str, object] = {}
        for name in WORKERS:
            load = combine(slices[(kind, name)])
            errors = load.outcomes.get("non_2xx", 0) + load.outcomes.get("other", 0)
            row[name] = {"rps": round(load.rps), "p50_ms": load.p50_ms, "p99_ms": load.p99_ms, "errors": errors}
        row["edge_over_sync"] = round(row["edge"]["rps"] / max(row["sync"]["rps"], 1), 2)  # type: ignore[index]
        result[kind] = row
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slice", type=int, default=8, help="seconds per wrk slice (3 per request and worker)")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--threads", type=int, default=Settings.worker_threads, help="threads per edge worker")
    args = parser.parse_args(argv)
    wrk = ensure_wrk()
    failed = False
    with tempfile.TemporaryDirectory(prefix="flokit-bench-workers-") as tmp:
        for backend in args.backends.split(","):
            result = bench(backend, args.slice, wrk, Path(tmp), args.threads)
            print(f"== {backend}: req/s (p50 / p99 ms), sync worker -> edge worker", flush=True)
            for kind, row in result.items():
                if kind == "backend":
                    continue
                sync, edge = row["sync"], row["edge"]  # type: ignore[index]
                print(
                    f"   {kind:<12} {sync['rps']:>6} ({sync['p50_ms']} / {sync['p99_ms']})  ->  "
                    f"{edge['rps']:>6} ({edge['p50_ms']} / {edge['p99_ms']})   x{row['edge_over_sync']}"  # type: ignore[index]
                    f"   errors {sync['errors']} / {edge['errors']}",
                    flush=True,
                )
                failed |= bool(sync["errors"] or edge["errors"])
            print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
