"""Actions-engine benchmark: `python -m tests.bench.actions [--users 1000000 --days 180]`.

1. generate: the payback benchmark's seeded demo history in a temp lake (`tests.bench.payback`).
2. full: the real Dagster refresh of every report asset, `action_signals` included (as there).
3. registry: a sandbox ad account connected and synced from the spend (budgets to size shifts on).
4. engine: `orchestration.actions.engine.run_engine` on that lake and registry, twice: the first run
   proposes, the second re-evaluates what the first opened (the steady state after every refresh).

Printed: the engine's seconds per refresh against the full refresh in the same run (target under
10 %), and each phase's peak memory (target under 1 GB for the engine). Each phase runs in its own
process so that its peak memory (ru_maxrss) is its own.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.bench.payback import START, WORKSPACE, _lake, _peak_mb, _refresh, phase_generate


def _database(root: Path) -> Any:
    from tests.support.money import reports_database
    from warehouse.db import database_for

    return database_for(reports_database(root, WORKSPACE))


def _now(days: int) -> datetime:
    # The history ends on START + days - 1; the engine runs the next morning.
    return datetime.combine(START + timedelta(days=days), datetime.min.time(), tzinfo=UTC) + timedelta(hours=6)


def phase_registry(root: Path, days: int) -> dict[str, Any]:
    from orchestration.adaccounts.sync import sync_accounts
    from transforms.adaccounts.kinds import validate_config
    from warehouse.adaccounts import repository as adaccounts

    db = _database(root)
    key = secrets.token_urlsafe(32)
    with db.write() as conn:
        account = adaccounts.connect(
            conn,
            workspace_id=WORKSPACE,
            platform="sandbox",
            config=validate_config("sandbox", {}),
            instance_key=key,
            actor="bench",
        )
    t0 = time.perf_counter()
    [result] = sync_accounts(db, _lake(root), key, ad_account_id=account.id, now=_now(days))
    with db.read() as conn:
        objects = len(adaccounts.entities(conn, ad_account_id=account.id))
    return {"seconds": round(time.perf_counter() - t0, 2), "status": result.status, "objects": objects}


def phase_engine(root: Path, days: int) -> dict[str, Any]:
    from orchestration.actions.engine import run_engine

    db = _database(root)
    runs = []
    for hours in (0, 6):
        t0 = time.perf_counter()
        [result] = run_engine(db, _lake(root), workspace_id=WORKSPACE, now=_now(days) + timedelta(hours=hours))
        runs.append({"seconds": round(time.perf_counter() - t0, 2), "summary": result.summary()})
    return {"first": runs[0], "second": runs[1], "seconds": max(r["seconds"] for r in runs)}


def _run_phase(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    if args.phase == "generate":
        result = phase_generate(root, args.users, args.days, args.seed)
    elif args.phase == "full":
        seconds, ok, _ = _refresh(root)
        result = {"seconds": round(seconds, 2), "success": ok}
    elif args.phase == "registry":
        result = phase_registry(root, args.days)
    else:
        result = phase_engine(root, args.days)
    result["peak_mb"] = round(_peak_mb())
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=180)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--dir", help="work directory (default: a temp dir, removed afterwards)")
    parser.add_argument("--phase", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        _run_phase(args)
        return
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="flokit-bench-"))
    print(f"actions benchmark: {args.users} users, {args.days} days, seed {args.seed}, in {root}")
    results: dict[str, dict[str, Any]] = {}
    try:
        for phase in ("generate", "full", "registry", "engine"):
            argv = [sys.executable, "-m", "tests.bench.actions", "--phase", phase, "--dir", str(root)]
            argv += ["--users", str(args.users), "--days", str(args.days), "--seed", str(args.seed)]
            out = subprocess.run(argv, capture_output=True, text=True, check=False)
            lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode != 0 or not lines:
                print(f"{phase}: FAILED\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}")
                raise SystemExit(1)
            results[phase] = json.loads(lines[-1].removeprefix("RESULT "))
            print(f"{phase:<10} {results[phase]}", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    full, engine = results["full"], results["engine"]
    share = engine["seconds"] / max(full["seconds"], 1e-9)
    print()
    print(f"events                  {results['generate']['events']:,}")
    print(f"full refresh (Dagster)  {full['seconds']} s, peak {full['peak_mb']} MB")
    print(f"engine, first run       {engine['first']['seconds']} s  ({engine['first']['summary']})")
    print(f"engine, re-evaluation   {engine['second']['seconds']} s  ({engine['second']['summary']})")
    print(f"engine per refresh      {engine['seconds']} s = {share:.1%} of the full refresh (target < 10 %)")
    print(f"engine peak memory      {engine['peak_mb']} MB (target < 1024 MB)")


if __name__ == "__main__":
    main()
