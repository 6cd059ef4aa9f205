"""Scale-out benchmark: `scripts/with-s3.sh .venv/bin/python -m tests.bench.scale [--users 1000000 --days 180]`.

1. local: the payback benchmark's history written to a local lake, then the full Dagster refresh
   of every report asset (tests/bench/payback.py's `generate` and `full` phases): the baseline.
2. s3: the same history and the same refresh with the lake in the object store of
   `scripts/with-s3.sh` (SeaweedFS on 127.0.0.1), on a worker whose cache is empty (the history's
   files are only in the store): the ratio to the baseline (target <= 1.5x) and
   the bytes moved, read from the loopback interface's counters around the phase (the store is
   the only other party on it while the phase runs).
3. publish-to-serve: the published store is published again `--publishes` times from the worker's
   data directory; an API host's follower (warehouse.reports.published.Follower, polling every
   2 s, as each API process does) holds each new version after p50 / p99 seconds
   (target p99 <= 10 s). Publishes are spaced by different fractions of the poll interval so the
   samples cover its phase.

Each refresh runs in its own process (as tests/bench/payback.py does) so its peak memory is its own.
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
import uuid
from pathlib import Path
from typing import Any

from tests.bench.payback import LAKE_URL_ENV
from warehouse.paths import DataPaths

ENDPOINT_ENV = "FLOKIT_TEST_S3_ENDPOINT"


def _loopback_bytes() -> int:
    """Bytes received on `lo` so far (every loopback byte is sent and received once)."""
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, counters = line.partition(":")
        if name.strip() == "lo":
            return int(counters.split()[0])
    return 0


def _phase(phase: str, root: Path, args: argparse.Namespace, lake_url: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tests.bench.payback", "--phase", phase, "--dir", str(root)]
    argv += ["--users", str(args.users), "--days", str(args.days), "--seed", str(args.seed)]
    env = {**os.environ, LAKE_URL_ENV: lake_url}
    root.mkdir(parents=True, exist_ok=True)
    before, cpu = _loopback_bytes(), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    moved = _loopback_bytes() - before
    spent = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"{phase} ({lake_url or 'local'}): FAILED\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1].removeprefix("RESULT "))
    result["loopback_mb"] = round(moved / 1e6, 1)
    # The phase's own CPU (user + system, its threads included): the worker cores a refresh uses.
    result["cpu_s"] = round(spent.ru_utime + spent.ru_stime - cpu.ru_utime - cpu.ru_stime, 1)
    return result


def _publish_to_serve(worker: Path, api_host: Path, lake_url: str, publishes: int) -> list[float]:
    """Seconds from each publish's pointer flip to the API host's follower holding that version."""
    from datetime import UTC, datetime

    from warehouse.reports.published import POLL_S, Follower, ReportCopy, publish

    worker_paths, host_paths = DataPaths(worker, lake_url), DataPaths(api_host, lake_url)
    store = worker_paths.object_store()
    assert store is not None
    follower = Follower(ReportCopy(host_paths, store), log=lambda _line: None)
    latencies = []
    for i in range(publishes):
        time.sleep(POLL_S * ((i * 0.37) % 1))  # a different point of the follower's poll each time
        version = publish(store, worker_paths.reports, generated_at=datetime.now(UTC))
        flipped = time.perf_counter()
        while (have := follower.copy.local_version()) is None or have.key != version.key:
            time.sleep(0.01)
        latencies.append(time.perf_counter() - flipped)
    return latencies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--publishes", type=int, default=20)
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    args = parser.parse_args(argv)
    if not os.environ.get(ENDPOINT_ENV):
        print(f"scale benchmark skipped: run it through scripts/with-s3.sh ({ENDPOINT_ENV} is not set)")
        return 0
    from tests.support.objects import s3_environment

    os.environ.update(s3_environment())
    lake_url = f"s3://{os.environ['FLOKIT_TEST_S3_BUCKET']}/bench-{uuid.uuid4().hex[:8]}"
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="flokit-scale-"))
    local, worker, api_host = root / "local", root / "worker", root / "api-host"
    print(f"scale benchmark: {args.users} users, {args.days} days, seed {args.seed}; lake {lake_url}; in {root}")
    try:
        results = {
            "local generate": _phase("generate", local, args, ""),
            "local full": _phase("full", local, args, ""),
            "s3 generate": _phase("generate", worker, args, lake_url),
        }
        # A cold worker: the history was written by another host, its files are only in the store.
        shutil.rmtree(DataPaths(worker, lake_url).lake_cache, ignore_errors=True)
        results["s3 full"] = _phase("full", worker, args, lake_url)
        for name, result in results.items():
            print(f"{name:<15} {result}", flush=True)
        size = (worker / "reports.duckdb").stat().st_size
        latencies = sorted(_publish_to_serve(worker, api_host, lake_url, args.publishes))
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    base, s3 = results["local full"], results["s3 full"]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print()
    print(f"events                    {results['local generate']['events']:,}")
    print(f"full refresh, local lake  {base['seconds']} s, {base['cpu_s']} CPU s, peak {base['peak_mb']} MB (baseline)")
    print(
        f"full refresh, S3 lake     {s3['seconds']} s, {s3['cpu_s']} CPU s, peak {s3['peak_mb']} MB -> "
        f"{s3['seconds'] / max(base['seconds'], 1e-9):.2f}x the baseline (target <= 1.5x)"
    )
    print(f"bytes moved (loopback)    {s3['loopback_mb']} MB during the S3 refresh, {base['loopback_mb']} MB local")
    upload, write = results["s3 generate"]["write_s"], results["local generate"]["write_s"]
    print(f"history upload            {upload} s (local write {write} s)")
    print(
        f"publish-to-serve          p50 {statistics.median(latencies):.2f} s, p99 {p99:.2f} s over "
        f"{len(latencies)} publishes of {size / 1e6:.1f} MB (target p99 <= 10 s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
