"""Record what FloKit answers to a fixed set of requests, to compare two commits byte for byte.

A refactoring that promises "behaviour stays the same" (issue 14's one-shape change, issue 32's
rooms) is checked by answering the same requests from the same data with the code before and after
and comparing the bytes. This script is the recorder; the data is a copy of a prepared data dir,
so both commits read the same rows and each run's writes (a refused notification is stored, a login
link is used) never reach the next run.

    python scripts/response_bytes.py --data-dir DIR --out before.json   # at commit A
    python scripts/response_bytes.py --data-dir DIR --out after.json    # at commit B
    python scripts/response_bytes.py --compare before.json after.json

DIR is prepared once (any commit): `flokit db upgrade`, `flokit admin bootstrap --name bytes --json
> DIR/../boot.json`, `flokit demo seed --workspace WS --users 1500 --days 40`, `flokit refresh`.
What varies by itself between two runs (dates in headers, CSRF tokens, session cookies, one-time
tokens) is replaced by a placeholder before recording; everything else is compared as served.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_VOLATILE_HEADERS = {"date", "x-request-id", "set-cookie", "server"}
_VOLATILE_BODY = [
    (re.compile(rb'(name="csrf_token"[^>]*value=")[^"]+'), rb"\1<csrf>"),
    (re.compile(rb'(value=")[^"]+("[^>]*name="csrf_token")'), rb"\1<csrf>\2"),
    (re.compile(rb'(<meta name="csrf-token" content=")[^"]+'), rb"\1<csrf>"),
    (re.compile(rb'(name="token"[^>]*value=")[^"]+'), rb"\1<token>"),
    (re.compile(rb'(value=")[^"]+("[^>]*name="token")'), rb"\1<token>\2"),
    (re.compile(rb'("request_id": ?")[^"]+'), rb"\1<request-id>"),
    (re.compile(rb'("X-CSRFToken": ?")[^"]+'), rb"\1<csrf>"),
]
_TIME = re.compile(rb'<time datetime="([^"]+)">[^<]*</time>')


def _normalise(body: bytes, run_start: str) -> bytes:
    """Placeholders for what a run itself changes: tokens, and times it stamped (a key's last use)."""
    for pattern, replacement in _VOLATILE_BODY:
        body = pattern.sub(replacement, body)
    stamped = run_start.encode()
    return _TIME.sub(lambda m: b"<time during the run>" if m.group(1) >= stamped else m.group(0), body)


def _requests(boot: dict[str, Any], ids: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The fixed set: every surface's reads, and refusals that write nothing or the same row."""
    rw = {"Authorization": f"Bearer {boot['api_key_read_write']}"}
    ro = {"Authorization": f"Bearer {boot['api_key_read_only']}"}
    app = {"x-api-key": boot["app_key"]}
    out: list[dict[str, Any]] = [
        {"method": "GET", "path": "/healthz"},
        {"method": "GET", "path": "/readyz"},
        {"method": "GET", "path": "/openapi.json"},
        {"method": "GET", "path": "/docs"},
        {"method": "GET", "path": "/v1/workspace", "headers": rw},
        {"method": "GET", "path": "/v1/workspace"},
        {"method": "GET", "path": "/v1/workspace", "headers": {"Authorization": "Bearer flk_nope"}},
        {"method": "GET", "path": "/v1/actions", "headers": rw},
        {"method": "GET", "path": "/v1/actions?limit=2&offset=1", "headers": ro},
        {"method": "GET", "path": "/v1/actions?status=proposed", "headers": rw},
        {"method": "GET", "path": "/v1/actions?status=nope", "headers": rw},
        {"method": "GET", "path": "/v1/actions?limit=0", "headers": rw},
        {"method": "GET", "path": "/v1/actions/act_doesnotexist", "headers": rw},
        {"method": "POST", "path": "/v1/actions", "headers": rw, "json": {}},
        {"method": "POST", "path": "/v1/actions", "headers": rw, "json": {"type": "nope"}},
        {"method": "POST", "path": "/v1/actions", "headers": ro, "json": {"type": "budget_shift"}},
        {"method": "POST", "path": "/v1/actions", "headers": rw, "data": "not json", "content_type": "text/plain"},
        {
            "method": "POST",
            "path": "/v1/actions/act_doesnotexist/approve",
            "headers": rw,
            "json": {"approved_by": "a@b.c"},
        },
        {"method": "POST", "path": "/v1/actions/act_doesnotexist/reject", "headers": rw, "json": {}},
        {"method": "POST", "path": "/v1/actions/act_doesnotexist/rollback", "headers": rw, "json": {}},
        {"method": "GET", "path": "/v1/integrations", "headers": rw},
        {"method": "GET", "path": "/v1/integrations/int_doesnotexist", "headers": rw},
        {"method": "POST", "path": "/v1/integrations/int_doesnotexist/sync", "headers": rw, "json": {}},
        {"method": "POST", "path": "/v1/events", "headers": rw, "json": {}},
        {"method": "POST", "path": "/v1/events", "headers": rw, "json": {"event_type": "nope"}},
        {"method": "POST", "path": "/v1/webhooks/test", "headers": rw, "json": {"endpoint_id": "whe_nope"}},
        {"method": "POST", "path": "/v1/webhooks/test", "headers": rw, "json": {}},
        {"method": "GET", "path": "/api/paywall/config", "headers": app},
        {"method": "GET", "path": "/api/paywall/config"},
        {"method": "GET", "path": "/api/paywall/entitlement", "headers": app},
        {"method": "GET", "path": "/api/paywall/entitlement", "headers": {**app, "x-user-id": "u_nobody"}},
        {"method": "GET", "path": "/api/entitlements/current", "headers": {**app, "x-user-id": "u_nobody"}},
        {"method": "POST", "path": "/api/paywall/events", "headers": app, "json": {}},
        {"method": "POST", "path": "/api/paywall/receipt", "headers": app, "json": {}},
        {"method": "POST", "path": "/api/paywall/token", "headers": app, "json": {}},
        {"method": "GET", "path": "/ingest/nope"},
        {"method": "GET", "path": "/ingest/attribution_provider_a"},
        {"method": "POST", "path": "/ingest/attribution_provider_b", "json": {}},
        {"method": "POST", "path": "/webhooks/ios_store", "json": {}},
        {"method": "POST", "path": "/webhooks/android_store", "json": {}},
        {"method": "POST", "path": "/webhooks/payment_processor", "data": "{}", "content_type": "application/json"},
        {"method": "POST", "path": "/api/providers/subscription_provider_a/webhook", "json": {}},
        {"method": "POST", "path": "/api/providers/subscription_provider_b/webhook", "json": {}},
        {"method": "POST", "path": "/api/providers/generic-subscription/webhook", "json": {}},
        {"method": "POST", "path": "/api/integrations/mmp/generic-attribution", "json": {}},
    ]
    for start, end in (("2000-01-01", "2100-01-01"), ("2026-13-01", "2026-01-01")):
        for group in ("campaign", "creative", "country", "offer", "paywall"):
            q = f"start_date={start}&end_date={end}&group_by={group}"
            out.append({"method": "GET", "path": f"/v1/reports/payback?{q}", "headers": ro})
            c = f"cohort_start={start}&cohort_end={end}&group_by={group}"
            out.append({"method": "GET", "path": f"/v1/reports/cohorts?{c}", "headers": ro})
    for action_id in ids["actions"][:6]:
        out.append({"method": "GET", "path": f"/v1/actions/{action_id}", "headers": rw})
    for integration_id in ids["integrations"][:3]:
        out.append({"method": "GET", "path": f"/v1/integrations/{integration_id}", "headers": rw})
    dashboard = [
        "/dashboard/",
        "/dashboard/actions",
        "/dashboard/integrations",
        "/dashboard/keys",
        "/dashboard/payback",
        "/dashboard/payback.csv",
        "/dashboard/cohorts",
        "/dashboard/cohorts.csv",
        "/dashboard/paywalls",
        "/dashboard/webhooks",
        "/dashboard/actions/act_doesnotexist",
        "/dashboard/integrations/int_nope",
        "/dashboard/webhooks/whe_nope",
        "/dashboard/ad-accounts/ada_nope",
    ]
    dashboard += [f"/dashboard/actions/{a}" for a in ids["actions"][:4]]
    dashboard += [f"/dashboard/integrations/{i}" for i in ids["integrations"][:2]]
    dashboard += [f"/dashboard/ad-accounts/{a}" for a in ids["ad_accounts"][:2]]
    out += [{"method": "GET", "path": p, "dashboard": True} for p in dashboard]
    out.append({"method": "GET", "path": "/dashboard/actions"})  # signed out: the redirect
    return out


def _ids(data_dir: Path, workspace_id: str) -> dict[str, list[str]]:
    """The rows to read one by one, in a stable order, from the database itself."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{data_dir / 'flokit.db'}")
    with engine.connect() as conn:

        def col(sql: str) -> list[str]:
            return [r[0] for r in conn.execute(sa.text(sql), {"ws": workspace_id})]

        return {
            "actions": col("SELECT id FROM actions WHERE workspace_id = :ws ORDER BY id"),
            "integrations": col("SELECT id FROM integrations WHERE workspace_id = :ws ORDER BY id"),
            "ad_accounts": col("SELECT id FROM ad_accounts WHERE workspace_id = :ws ORDER BY id"),
        }


def record(data_dir: Path, boot: dict[str, Any], out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(data_dir, copy)
        os.environ["FLOKIT_DATA_DIR"] = str(copy)
        flokit = Path(sys.executable).parent / "flokit"
        link = json.loads(
            subprocess.run(
                [str(flokit), "admin", "login-link", "--as", "bytes@example.com", "--json"],
                check=True,
                capture_output=True,
                text=True,
                env=dict(os.environ),
            ).stdout
        )
        from api.app import create_app

        app = create_app()
        anonymous = app.test_client()
        operator = app.test_client()
        token = str(link.get("token") or link["url"].split("token=")[1])
        page = operator.get(f"/dashboard/login?token={token}")
        csrf = re.search(rb'name="csrf_token"[^>]*value="([^"]+)', page.data)
        assert csrf, page.data[:500]
        signed = operator.post("/dashboard/login", data={"token": token, "csrf_token": csrf.group(1).decode()})
        assert signed.status_code in (302, 303), (signed.status_code, signed.data[:300])
        answers = []
        run_start = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for index, req in enumerate(_requests(boot, _ids(copy, boot["workspace_id"]))):
            client = operator if req.get("dashboard") else anonymous
            kwargs = {k: req[k] for k in ("headers", "json", "data", "content_type") if k in req}
            response = client.open(req["path"], method=req["method"], **kwargs)
            body = _normalise(response.get_data(), run_start)
            headers = sorted((k, v) for k, v in response.headers.items() if k.lower() not in _VOLATILE_HEADERS)
            answers.append(
                {
                    "request": f"{index:03} {req['method']} {req['path']}"
                    + (" (dashboard)" if req.get("dashboard") else ""),
                    "status": response.status_code,
                    "headers": headers,
                    "sha256": hashlib.sha256(body).hexdigest(),
                    "body": body.decode("utf-8", "replace"),
                }
            )
    out.write_text(json.dumps(answers, indent=1))
    print(f"{len(answers)} requests recorded to {out}")


def compare(before: Path, after: Path) -> int:
    a = {x["request"]: x for x in json.loads(before.read_text())}
    b = {x["request"]: x for x in json.loads(after.read_text())}
    differ = 0
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            print(f"only in {'after' if x is None else 'before'}: {key}")
            differ += 1
        elif (x["status"], x["headers"], x["sha256"]) != (y["status"], y["headers"], y["sha256"]):
            differ += 1
            print(f"DIFFERS: {key}: status {x['status']} -> {y['status']}")
            if x["headers"] != y["headers"]:
                print(f"  headers {x['headers']} -> {y['headers']}")
            if x["sha256"] != y["sha256"]:
                import difflib

                diff = difflib.unified_diff(x["body"].splitlines(), y["body"].splitlines(), lineterm="", n=1)
                print("\n".join("  " + line for line in list(diff)[2:40]))
    print(f"{len(a)} requests before, {len(b)} after, {differ} differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument(
        "--boot", type=Path, help="flokit admin bootstrap --json output (default: DATA_DIR/../boot.json)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", nargs=2, type=Path)
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    boot = json.loads((args.boot or args.data_dir.parent / "boot.json").read_text())
    record(args.data_dir.resolve(), boot, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
