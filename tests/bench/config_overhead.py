"""What a running experiment adds to one paywall config read, in process.

    .venv/bin/python -m tests.bench.config_overhead [--rounds 8] [--reads 2000]
    scripts/with-postgres.sh .venv/bin/python -m tests.bench.config_overhead   # both databases

`tests/bench/gateway.py` measures the config read against the /healthz ceiling through gunicorn
and wrk, which is the issue's bar, but on a busy two-core machine (a helper's tests, a suite) its
ceiling moves by half between slices. This measures only the application's share, where the
experiment's work is: the same world as the gateway bench (a paywall `onboarding` with a running
DE-audience experiment, the same paywall as `plain` without one, 2 000 users), read through the
Flask app in this process with the bench's headers (`x-country: DE`), the two paywalls alternating
in rounds of `--reads` requests after a warm-up that exposes every user; printed: the best round of
each (the least disturbed), and the difference: what choosing the experiment's variant costs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from api.app import create_app
from tests.bench.gateway import USERS, prepare
from tests.bench.ingest import database
from warehouse.settings import Settings


def measure(backend: str, rounds: int, reads: int, work: Path) -> dict[str, object]:
    with database(backend, work) as url:
        boot = prepare(url, secrets.token_urlsafe(32))  # the signing root's sealing key: unused here
        settings = Settings(
            data_dir=work, database_url=url, surfaces=("gateway",), rate_limit_app_client="1000000/second"
        )
        client = create_app(settings).test_client()
        logging.disable(logging.CRITICAL)  # the access log is not the read's work
        try:

            def run(paywall: str, n: int) -> float:
                started = time.perf_counter()
                for i in range(n):
                    answer = client.get(
                        "/api/paywall/config",
                        query_string={"app_id": boot["app_id"], "paywall_id": paywall},
                        headers={"x-user-id": f"user-{i % USERS}", "x-country": "DE"},
                    )
                    assert answer.status_code == 200, answer.json
                return (time.perf_counter() - started) / n * 1e6

            run("onboarding", USERS)  # every user exposed: what a worker holds after its first minutes
            run("plain", USERS)
            best = {"config_plain": float("inf"), "config": float("inf")}
            for _ in range(rounds):
                best["config_plain"] = min(best["config_plain"], run("plain", reads))
                best["config"] = min(best["config"], run("onboarding", reads))
        finally:
            logging.disable(logging.NOTSET)
        return {
            "backend": backend,
            "config_plain_us": round(best["config_plain"], 1),
            "config_us": round(best["config"], 1),
            "experiment_us": round(best["config"] - best["config_plain"], 1),
            "experiment_share": round(best["config"] / best["config_plain"] - 1, 3),
        }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    both = "sqlite,postgres" if os.environ.get("FLOKIT_TEST_POSTGRES_URL") else "sqlite"
    parser.add_argument("--backends", default=both, help=f"comma-separated (default here: {both})")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--reads", type=int, default=2000)
    args = parser.parse_args(argv)
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(measure(backend, args.rounds, args.reads, Path(tmp))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
