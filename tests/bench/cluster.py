"""Run launch benchmark: `scripts/with-cluster.sh .venv/bin/python -m tests.bench.cluster [--runs 24]`.

How fast does a Celery deployment start runs, and where does a run wait? One daemon host and
Celery worker hosts (`flokit serve daemon`, `flokit serve worker`, tests/support/cluster.py: hosts
that share no directory) on the PostgreSQL and Redis of `scripts/with-cluster.sh`. `--runs` runs of
a job that does almost nothing (`prune_dedup_claims_job`: one DELETE on an empty table) are
submitted at once through the instance, as `flokit refresh` submits (orchestration/submit.py), so
what is measured is the machinery, not the work:

- baseline: 1 worker host with 2 pool slots;
- scaled: 2 worker hosts with 4 slots each (8, the deployment's `max_concurrent_runs`).

For each run, Dagster's own records give the time from its creation to its start on a worker
(queue wait: the run queue's dequeue, the Celery hop, the worker loading the code) and from its
start to its end. Runs per second is runs / (last end - first creation).

The daemon dequeues (`dequeue_interval_seconds`) and launches runs one at a time; with more
slots than it can fill, runs/s stops growing with slots: that is the single daemon's ceiling the
design note (../shared/design/scale-out.md section 9) asks to measure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

JOB = "prune_dedup_claims_job"
REDIS_BASE_DB = 48  # beyond the suite's databases (scripts/with-redis.sh starts 64)


@contextmanager
def _deployment_env() -> Iterator[dict[str, str]]:
    """A fresh, migrated database and empty Redis databases: a deployment of its own."""
    import psycopg

    from tests.support.cluster import fresh_redis_databases
    from warehouse import migrate
    from warehouse.db import Database

    dsn, url = os.environ["FLOKIT_TEST_POSTGRES_DSN"], os.environ["FLOKIT_TEST_POSTGRES_URL"]
    name = f"flokit_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    database_url = url.rsplit("/", 1)[0] + f"/{name}"
    db = Database(database_url)
    migrate.upgrade(db)
    db.dispose()
    broker, results = fresh_redis_databases(REDIS_BASE_DB, 2)
    env = {
        **os.environ,
        "FLOKIT_DATABASE_URL": database_url,
        "FLOKIT_RUN_LAUNCHER": "celery",
        "FLOKIT_CELERY_BROKER_URL": broker,
        "FLOKIT_CELERY_RESULT_URL": results,
        "FLOKIT_SECRET_KEY": "b" * 48,
    }
    try:
        yield env
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _measure(root: Path, hosts: int, slots: int, runs: int) -> dict[str, Any]:
    import dagster as dg

    from orchestration.submit import through_queue
    from tests.support import ROOT
    from tests.support.cluster import host, instance_of, serve

    with ExitStack() as stack:
        env = stack.enter_context(_deployment_env())
        control = host(root, "control", env)
        daemon = stack.enter_context(serve(control, "daemon"))
        workers = [
            stack.enter_context(serve(host(root, f"worker-{n}", env), "worker", "--name", f"w{n}", "-c", str(slots)))
            for n in range(1, hosts + 1)
        ]
        for role in (daemon, *workers):
            role.wait_ready()
        instance = stack.enter_context(instance_of(daemon))
        execute = stack.enter_context(through_queue(instance, ROOT / "workspace.yaml"))
        with ThreadPoolExecutor(max_workers=max(runs, hosts * slots)) as pool:
            # As many runs as slots first, so that the pool processes have loaded the code (a cold
            # one spends seconds importing it: a one-time cost, not the machinery's).
            list(pool.map(lambda _n: execute(JOB, tags={"flokit/bench": "warm-up"}), range(hosts * slots)))
            started = time.time()
            results = list(pool.map(lambda _n: execute(JOB, tags={"flokit/bench": "cluster"}), range(runs)))
        wall = time.time() - started
        records = [instance.get_run_record_by_id(r.run_id) for r in results]
    failed = [r.run_id for r in results if not r.success]
    if failed:
        raise SystemExit(f"{len(failed)} runs failed: {failed[:3]}")
    waits, spans = [], []
    for record in records:
        assert record is not None and record.start_time and record.end_time
        waits.append(record.start_time - record.create_timestamp.timestamp())
        spans.append(record.end_time - record.start_time)
    assert all(record.dagster_run.status == dg.DagsterRunStatus.SUCCESS for record in records if record)
    first = min(r.create_timestamp.timestamp() for r in records if r)
    last = max(r.end_time for r in records if r and r.end_time)
    waits.sort()
    return {
        "slots": hosts * slots,
        "runs_per_s": runs / (last - first),
        "wall_s": wall,
        "wait_p50": statistics.median(waits),
        "wait_p95": waits[min(len(waits) - 1, int(len(waits) * 0.95))],
        "run_p50": statistics.median(spans),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=24)
    args = parser.parse_args(argv)
    if not (os.environ.get("FLOKIT_TEST_POSTGRES_DSN") and os.environ.get("FLOKIT_TEST_REDIS_URL")):
        print("cluster benchmark skipped: run it through scripts/with-cluster.sh (PostgreSQL and Redis)")
        return 0
    root = Path(tempfile.mkdtemp(prefix="flokit-cluster-bench-"))
    print(f"run launch benchmark: {args.runs} runs of {JOB} submitted at once; in {root}", flush=True)
    baseline = _measure(root / "baseline", hosts=1, slots=2, runs=args.runs)
    scaled = _measure(root / "scaled", hosts=2, slots=4, runs=args.runs)
    for name, result in (("1 host x 2 slots", baseline), ("2 hosts x 4 slots", scaled)):
        print(
            f"{name:<18} {result['runs_per_s']:.2f} runs/s; queue wait p50 {result['wait_p50']:.1f} s, "
            f"p95 {result['wait_p95']:.1f} s; a run {result['run_p50']:.1f} s on its worker (p50); "
            f"{args.runs} runs in {result['wall_s']:.1f} s"
        )
    print(f"scaled / baseline runs/s: {scaled['runs_per_s'] / baseline['runs_per_s']:.2f}x for 4x the slots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
