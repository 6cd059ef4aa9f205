"""A fake Adjust Report Service on 127.0.0.1: `GET /reports-service/report` as Adjust documents it.

Shapes from https://dev.adjust.com/en/api/rs-api/reports (source: adjust/dev-docs
`src/content/docs/en/api/rs-api/reports.mdx`, `partials/_RS-responses.mdx`): Bearer token;
required `dimensions`, `metrics`, `date_period` (absolute `YYYY-MM-DD:YYYY-MM-DD`), filters
`<dimension>__in`; 200 `{"rows": [...], "totals": {...}, "warnings": []}` with metric values as
strings ("cost": "1000"), 204 when there is nothing, 400 for a malformed request, 401/403 for
the token, 429 beyond 50 simultaneous requests, 503, 504. Adjust does not document the error
bodies; this fake answers them with a JSON object holding an `error` message (our client keeps
whatever text comes).

The data is deterministic: every (app, campaign, creative, country, day) has a cost and an
install count computed from the indexes, so two fakes with the same shape serve the same rows.
Switches (attributes, changeable while it runs): `auth_status` (401/403 for every call),
`rate_limited` (that many bare 429s first, with `retry_after` seconds if set), `unavailable`
(that many 503s first), `empty` (204), `restated` (day -> factor on that day's costs),
`removed` ((day, campaign) pairs gone from a restated day). Beyond `max_parallel` simultaneous
requests it answers 429, as Adjust does.

Run alone (the sync benchmark serves from its own process):
    python -m tests.providers.adjust_fake --campaigns 50 --creatives 20 --countries 30
prints its URL on the first line, then serves until killed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

PATH = "/reports-service/report"
TOKEN = "adjust-test-token-0000"
# Assigned ISO 3166-1 codes (Adjust's `country_code` is "2-character value ISO 3166", e.g. `US`).
COUNTRIES = tuple(
    "US GB DE FR JP BR IN CA AU ES IT MX KR NL SE NO DK FI PL TR SA AE ID TH VN PH MY SG NZ AR "  # noqa: SIM905
    "CL CO PE ZA EG NG KE IL IE AT CH BE PT CZ HU RO GR UA TW HK".split(" ")
)
DIMENSIONS = frozenset({"day", "app_token", "campaign", "adgroup", "creative", "country_code"})
METRICS = frozenset({"cost", "installs"})


def campaign_name(i: int) -> str:
    """Tracker sub-level 1: "usually contains campaign name and id"."""
    return f"Campaign {i:02d} ({100000 + i})"


def creative_name(i: int, j: int) -> str:
    return f"Creative {j:02d} ({500000 + i * 100 + j})"


def adgroup_name(i: int, j: int) -> str:
    return f"Adgroup {j % 2} ({700000 + i * 10 + j % 2})"


@dataclass
class AdjustFake:
    campaigns: int = 3
    creatives: int = 2
    countries: int = 2
    apps: tuple[str, ...] = ("abc123app",)
    token: str = TOKEN
    first_day: date = date(2000, 1, 1)  # no data before (a real account has a start too)
    auth_status: int | None = None
    rate_limited: int = 0
    retry_after: str | None = None
    unavailable: int = 0
    empty: bool = False
    restated: dict[date, float] = field(default_factory=dict)
    removed: set[tuple[date, str]] = field(default_factory=set)
    max_parallel: int = 50
    calls: list[dict[str, str]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _inflight: int = 0
    _cache: dict[Any, list[tuple[int, int, int, str, int, int]]] = field(default_factory=dict)

    # -- the data ---------------------------------------------------------------------------

    def cost_cents(self, app: int, i: int, j: int, k: int, day: date) -> int:
        base = (app * 31 + i * 7919 + j * 104729 + k * 1299709 + day.toordinal() * 15485863) % 9000 + 1000
        factor = self.restated.get(day)
        return base if factor is None else round(base * factor)

    def installs(self, app: int, i: int, j: int, k: int, day: date) -> int:
        return (app + i * 3 + j * 5 + k * 7 + day.toordinal()) % 20 + 1

    def expected_spend(self, day: date, app_tokens: Iterable[str] | None = None) -> dict[tuple[str, str, str], float]:
        """(campaign, creative, country) -> cost of one day, as a sync should land it."""
        out: dict[tuple[str, str, str], float] = {}
        for a, _ in self._apps(app_tokens):
            for i, j, k in self._cells():
                if (day, campaign_name(i)) in self.removed:
                    continue
                key = (campaign_name(i), creative_name(i, j), COUNTRIES[k])
                out[key] = out.get(key, 0.0) + self.cost_cents(a, i, j, k, day) / 100
        return out

    def _apps(self, app_tokens: Iterable[str] | None) -> list[tuple[int, str]]:
        wanted = None if app_tokens is None else set(app_tokens)
        return [(a, t) for a, t in enumerate(self.apps) if wanted is None or t in wanted]

    def _cells(self) -> Iterator[tuple[int, int, int]]:
        for i in range(self.campaigns):
            for j in range(self.creatives):
                for k in range(self.countries):
                    yield i, j, k

    # -- HTTP ---------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        with self._lock:
            self._inflight += 1
            crowded = self._inflight > self.max_parallel
        try:
            response = self._answer(request, crowded)
        finally:
            with self._lock:
                self._inflight -= 1
        with self._lock:
            self.statuses.append(response.status_code)
        return response(environ, start_response)

    def _answer(self, request: Request, crowded: bool) -> Response:
        if request.path != PATH:
            return _error(404, "Not found")
        params = {k: request.args.get(k, "") for k in request.args}
        with self._lock:
            self.calls.append(params)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _error(401, "Authentication failed: invalid or missing API token")
        if self.auth_status is not None:
            return _error(self.auth_status, "Forbidden: the user has no permission for this report")
        with self._lock:
            limited = crowded or self.rate_limited > 0
            if self.rate_limited > 0 and not crowded:
                self.rate_limited -= 1
            down = not limited and self.unavailable > 0
            if down:
                self.unavailable -= 1
        if limited:
            headers = {"Retry-After": self.retry_after} if self.retry_after else {}
            return Response(b"", status=429, headers=headers)  # bare, as Adjust answers it
        if down:
            return _error(503, "Service unavailable")
        try:
            dims, metrics, first, last = _parse(params)
        except ValueError as exc:
            return _error(400, str(exc))
        if self.empty:
            return Response(status=204)
        app_tokens = params["app_token__in"].split(",") if params.get("app_token__in") else None
        days = [first + timedelta(n) for n in range((last - first).days + 1) if first + timedelta(n) >= self.first_day]
        if not days or not self._apps(app_tokens):
            return Response(status=204)
        body = self._body(days, dims, metrics, app_tokens)
        return Response(body, status=200, mimetype="application/json")

    def _body(
        self, days: list[date], dims: list[str], metrics: list[str], app_tokens: list[str] | None
    ) -> Iterator[bytes]:
        """The report, streamed a day at a time (a 90-day report of a large account is ~400 MB)."""
        totals = dict.fromkeys(metrics, 0)
        yield b'{"rows": ['
        first = True
        for day in days:
            rows = self._day_rows(day, dims, metrics, app_tokens, totals)
            if not rows:
                continue
            yield (b"" if first else b",") + ",".join(rows).encode()
            first = False
        total = {m: (totals[m] / 100 if m == "cost" else totals[m]) for m in metrics}
        yield ('], "totals": ' + json.dumps(total) + ', "warnings": []}').encode()

    def _day_rows(
        self, day: date, dims: list[str], metrics: list[str], app_tokens: list[str] | None, totals: dict[str, int]
    ) -> list[str]:
        apps = self._apps(app_tokens)
        if {"campaign", "creative", "country_code"} <= set(dims) and (len(apps) == 1 or "app_token" in dims):
            return self._cell_rows(day, dims, metrics, apps, totals)
        groups: dict[tuple[str, ...], list[int]] = {}
        iso = day.isoformat()
        for a, app in self._apps(app_tokens):
            for i, j, k in self._cells():
                campaign = campaign_name(i)
                if (day, campaign) in self.removed:
                    continue
                values = {
                    "day": iso,
                    "app_token": app,
                    "campaign": campaign,
                    "adgroup": adgroup_name(i, j),
                    "creative": creative_name(i, j),
                    "country_code": COUNTRIES[k],
                }
                key = tuple(values[d] for d in dims)
                sums = groups.setdefault(key, [0, 0])
                sums[0] += self.cost_cents(a, i, j, k, day)
                sums[1] += self.installs(a, i, j, k, day)
        rows = []
        for key, (cents, installs) in groups.items():
            totals["cost"] = totals.get("cost", 0) + cents
            totals["installs"] = totals.get("installs", 0) + installs
            row: dict[str, Any] = {"attr_dependency": {}}
            row.update(zip(dims, key, strict=True))
            if "cost" in metrics:
                row["cost"] = f"{cents // 100}.{cents % 100:02d}"
            if "installs" in metrics:
                row["installs"] = str(installs)
            rows.append(json.dumps(row))
        return rows

    def _cell_rows(
        self, day: date, dims: list[str], metrics: list[str], apps: list[tuple[int, str]], totals: dict[str, int]
    ) -> list[str]:
        """One row per cell, nothing to sum: the rows from cached JSON fragments (the benchmark
        asks for 2.7 M of them, and the fake should not be what it measures)."""
        iso = day.isoformat()
        ordinal = day.toordinal()
        factor = self.restated.get(day)
        rows = []
        cost_total = installs_total = 0
        want_cost, want_installs = "cost" in metrics, "installs" in metrics
        for a, app in apps:
            for i, _j, _k, fragment, base, seed in self._fragments(dims, a, app):
                if self.removed and (day, campaign_name(i)) in self.removed:
                    continue
                cents = (base + ordinal * 15485863) % 9000 + 1000
                if factor is not None:
                    cents = round(cents * factor)
                installs = (seed + ordinal) % 20 + 1
                cost_total += cents
                installs_total += installs
                row = '{"attr_dependency": {}, "day": "' + iso + '", ' + fragment
                if want_cost:
                    row += f', "cost": "{cents // 100}.{cents % 100:02d}"'
                if want_installs:
                    row += f', "installs": "{installs}"'
                rows.append(row + "}")
        totals["cost"] = totals.get("cost", 0) + cost_total
        totals["installs"] = totals.get("installs", 0) + installs_total
        return rows

    def _fragments(self, dims: list[str], a: int, app: str) -> list[tuple[int, int, int, str, int, int]]:
        key = (tuple(dims), a, app, self.campaigns, self.creatives, self.countries)
        cached = self._cache.get(key)
        if cached is None:
            cached = []
            for i, j, k in self._cells():
                values = {
                    "app_token": app,
                    "campaign": campaign_name(i),
                    "adgroup": adgroup_name(i, j),
                    "creative": creative_name(i, j),
                    "country_code": COUNTRIES[k],
                }
                fragment = ", ".join(f"{json.dumps(d)}: {json.dumps(values[d])}" for d in dims if d != "day")
                base = a * 31 + i * 7919 + j * 104729 + k * 1299709
                cached.append((i, j, k, fragment, base, a + i * 3 + j * 5 + k * 7))
            self._cache[key] = cached
        return cached


def _error(status: int, message: str) -> Response:
    return Response(json.dumps({"error": message}), status=status, mimetype="application/json")


def _parse(params: dict[str, str]) -> tuple[list[str], list[str], date, date]:
    for required in ("dimensions", "metrics", "date_period"):
        if not params.get(required):
            raise ValueError(f"missing required parameter {required}")
    dims = params["dimensions"].split(",")
    metrics = params["metrics"].split(",")
    unknown = [d for d in dims if d not in DIMENSIONS] + [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unsupported dimensions or metrics: {', '.join(unknown)}")
    try:
        first_s, last_s = params["date_period"].split(":")
        first, last = date.fromisoformat(first_s), date.fromisoformat(last_s)
    except ValueError:
        raise ValueError(f"invalid date_period {params['date_period']!r}") from None
    if last < first:
        raise ValueError("date_period ends before it starts")
    return dims, metrics, first, last


@contextmanager
def running(fake: AdjustFake) -> Iterator[AdjustFake]:
    """Serve `fake` on 127.0.0.1 (a threaded werkzeug server); `fake.url` is its base URL."""
    server = make_server("127.0.0.1", 0, fake, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield fake
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="a fake Adjust Report Service on 127.0.0.1")
    parser.add_argument("--campaigns", type=int, default=50)
    parser.add_argument("--creatives", type=int, default=20)
    parser.add_argument("--countries", type=int, default=30)
    args = parser.parse_args(argv)
    fake = AdjustFake(campaigns=args.campaigns, creatives=args.creatives, countries=args.countries)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = make_server("127.0.0.1", 0, fake, threaded=True)
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
